import { z } from "zod";
import { envFlag } from "../core/env.ts";

const schema = z.object({
  DATABASE_URL: z.url(),
  RELAY_CONTROL_HOST: z.string().default("127.0.0.1"),
  RELAY_CONTROL_PORT: z.coerce.number().int().min(0).max(65535).default(8788),
  RELAY_ADMIN_TOKEN: z.string().min(32, "RELAY_ADMIN_TOKEN must be at least 32 characters"),
  RELAY_EDGE_TOKEN: z.string().min(32, "RELAY_EDGE_TOKEN must be at least 32 characters"),
  RELAY_ENCRYPTION_KEY: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters"),
  /** "1" enables the admin-only /admin/clock and /admin/rotation/run. */
  RELAY_DEV_CLOCK: envFlag,
  /** The inbound domain (`host[:port]`): the relay itself, which no target may point at. */
  RELAY_EDGE_DOMAIN: z.string().min(1).default("localhost:8787"),
  /** The scheme callers use for the edge domain; the panel's example requests show it. */
  RELAY_EDGE_SCHEME: z.enum(["http", "https"]).default("http"),
  /** The Temporal UI the panel links each request's workflow to. */
  RELAY_TEMPORAL_UI_URL: z.url().default("http://127.0.0.1:8233"),
  /** "1" lets targets point at private, loopback and link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: envFlag,
  RELAY_INITIAL_CREDITS: z.coerce.number().int().min(0).default(10_000),
  /** The edges' inbound body cap: the largest body an edge stores here (StoreBody). */
  RELAY_MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(5 * 1024 * 1024),
  /** A connection must send its first request's head within this, or it is closed. */
  RELAY_CONTROL_HEAD_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** When set, GET /metrics needs it as a bearer token; unset, only loopback peers may scrape. */
  RELAY_METRICS_TOKEN: z.string().min(1).optional(),
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233"),
  TEMPORAL_NAMESPACE: z.string().default("default"),
  TEMPORAL_API_KEY: z.string().optional(),
});

export type ControlConfig = z.infer<typeof schema>;

export function loadControlConfig(env: Record<string, string | undefined>): ControlConfig {
  return schema.parse(env);
}
