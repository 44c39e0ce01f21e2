import { z } from "zod";
import { envFlag, listenHost, listenPort, parseEnv, sharedEnv } from "../core/env.ts";
import { defaultProjectLimits, MAX_PROJECT_CAP, type ProjectLimits } from "../core/limits.ts";

const projectCap = (fallback: number) =>
  z.coerce.number().int().min(1).max(MAX_PROJECT_CAP).default(fallback);

const schema = z.object({
  DATABASE_URL: sharedEnv.DATABASE_URL,
  RELAY_CONTROL_HOST: listenHost,
  RELAY_CONTROL_PORT: listenPort(8788),
  RELAY_ADMIN_TOKEN: z.string().min(32, "RELAY_ADMIN_TOKEN must be at least 32 characters"),
  /** Opens the codec endpoint (/codec) and nothing else: for people reading histories. */
  RELAY_OPERATOR_TOKEN: z
    .string()
    .min(32, "RELAY_OPERATOR_TOKEN must be at least 32 characters")
    .optional(),
  RELAY_EDGE_TOKEN: sharedEnv.RELAY_EDGE_TOKEN,
  RELAY_ENCRYPTION_KEY: sharedEnv.RELAY_ENCRYPTION_KEY,
  RELAY_PAYLOAD_KEYS: sharedEnv.RELAY_PAYLOAD_KEYS,
  /**
   * "keyed": ids derived from callers' values (an Idempotency-Key's request id, an ordering
   * key's lane) are keyed with a key derived from RELAY_ENCRYPTION_KEY (core/id-digest.ts);
   * "unkeyed" keeps the plain hashes of earlier releases while their calls are in flight.
   */
  RELAY_DERIVED_IDS: z.enum(["keyed", "unkeyed"]).default("keyed"),
  /** "1" enables the admin-only /admin/clock and /admin/rotation/run. */
  RELAY_DEV_CLOCK: sharedEnv.RELAY_DEV_CLOCK,
  /** The inbound domain (`host[:port]`): the relay itself, which no target may point at. */
  RELAY_EDGE_DOMAIN: sharedEnv.RELAY_EDGE_DOMAIN,
  /** The scheme callers use for the edge domain; the panel's example requests show it. */
  RELAY_EDGE_SCHEME: z.enum(["http", "https"]).default("http"),
  /**
   * Where the control plane sends schedules' fires: an edge's listener, or the balancer in front
   * of the edges (each fire is a call to `{project}.{RELAY_EDGE_DOMAIN}` by Host).
   */
  RELAY_EDGE_URL: z.url().default("http://127.0.0.1:8787"),
  /** The Temporal UI the panel links each request's workflow to. */
  RELAY_TEMPORAL_UI_URL: z.url().default("http://127.0.0.1:8233"),
  /**
   * "1": the Temporal UI shows a member nothing of other projects (its own login and per-project
   * views), so the panel may link members' requests to it; otherwise only the admin gets links.
   */
  RELAY_TEMPORAL_UI_MEMBER_SAFE: envFlag,
  /** "1" lets targets point at private, loopback and link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: sharedEnv.RELAY_ALLOW_PRIVATE_TARGETS,
  RELAY_MAX_WAITING_DELIVERIES_FREE: sharedEnv.RELAY_MAX_WAITING_DELIVERIES_FREE,
  RELAY_MAX_WAITING_DELIVERIES_PAID: sharedEnv.RELAY_MAX_WAITING_DELIVERIES_PAID,
  RELAY_INITIAL_CREDITS: z.coerce.number().int().min(0).default(10_000),
  /** Per-project caps (core/limits.ts); an admin may set a project's own (PUT .../limits). */
  RELAY_MAX_ENDPOINTS_PER_PROJECT: projectCap(defaultProjectLimits.endpoints),
  RELAY_MAX_SCHEMA_BYTES_PER_PROJECT: projectCap(defaultProjectLimits.schemaBytes),
  RELAY_MAX_LINES_PER_PROJECT: projectCap(defaultProjectLimits.lines),
  RELAY_MAX_MEMBERS_PER_PROJECT: projectCap(defaultProjectLimits.members),
  RELAY_MAX_KEYS_PER_PROJECT: projectCap(defaultProjectLimits.keys),
  RELAY_MAX_REPLAYS_PER_PROJECT: projectCap(defaultProjectLimits.replays),
  /** The edges' inbound body cap: the largest body an edge stores here (StoreBody). */
  RELAY_MAX_BODY_BYTES: sharedEnv.RELAY_MAX_BODY_BYTES,
  /** A connection must send its first request's head within this, or it is closed. */
  RELAY_CONTROL_HEAD_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  RELAY_METRICS_TOKEN: sharedEnv.RELAY_METRICS_TOKEN,
  TEMPORAL_ADDRESS: sharedEnv.TEMPORAL_ADDRESS,
  /** Temporal's HTTP API, where the control plane makes accepted starts no edge confirmed. */
  TEMPORAL_HTTP_ADDRESS: sharedEnv.TEMPORAL_HTTP_ADDRESS,
  TEMPORAL_NAMESPACE: sharedEnv.TEMPORAL_NAMESPACE,
  TEMPORAL_API_KEY: sharedEnv.TEMPORAL_API_KEY,
  TEMPORAL_TLS_CA: sharedEnv.TEMPORAL_TLS_CA,
});

export type ControlConfig = z.infer<typeof schema>;

/** The deployment's per-project caps, as the operations take them. */
export function projectLimitsOf(config: ControlConfig): ProjectLimits {
  return {
    endpoints: config.RELAY_MAX_ENDPOINTS_PER_PROJECT,
    schemaBytes: config.RELAY_MAX_SCHEMA_BYTES_PER_PROJECT,
    lines: config.RELAY_MAX_LINES_PER_PROJECT,
    members: config.RELAY_MAX_MEMBERS_PER_PROJECT,
    keys: config.RELAY_MAX_KEYS_PER_PROJECT,
    replays: config.RELAY_MAX_REPLAYS_PER_PROJECT,
  };
}

export function loadControlConfig(env: Record<string, string | undefined>): ControlConfig {
  return parseEnv(schema, env);
}
