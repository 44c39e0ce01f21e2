import { z } from "zod";
import { envFlag } from "../core/env.ts";

const schema = z.object({
  DATABASE_URL: z.url(),
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233"),
  TEMPORAL_NAMESPACE: z.string().default("default"),
  /** Temporal Cloud API key; when set, the connection uses TLS. */
  TEMPORAL_API_KEY: z.string().optional(),
  RELAY_RETRY_INITIAL_MS: z.coerce.number().int().min(1).default(1000),
  RELAY_RETRY_BACKOFF: z.coerce.number().min(1).default(2),
  RELAY_RETRY_MAX_INTERVAL_MS: z.coerce.number().int().min(1).default(3_600_000),
  RELAY_RETRY_WINDOW_MS: z.coerce.number().int().min(1000).default(86_400_000),
  /** One delivery attempt's limit; past it (a worker lost mid-call) Temporal retries. */
  RELAY_ATTEMPT_TIMEOUT_MS: z.coerce.number().int().min(1000).default(120_000),
  /** How long a finished request (its attempts, its stored body) stays in the log. */
  RELAY_LOG_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** "1" lets deliveries reach private, loopback and link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: envFlag,
  /** "1": deliveries and rotations run on the control plane's dev clock; else on real time. */
  RELAY_DEV_CLOCK: envFlag,
  /** How long a stopping worker lets its attempts in flight finish. */
  RELAY_WORKER_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(8000),
  /** The worker's own listener: /healthz, /readyz and /metrics only. */
  RELAY_WORKER_HOST: z.string().default("127.0.0.1"),
  RELAY_WORKER_PORT: z.coerce.number().int().min(0).max(65535).default(8790),
  /** When set, GET /metrics needs it as a bearer token; unset, only loopback peers may scrape. */
  RELAY_METRICS_TOKEN: z.string().min(1).optional(),
  /** Seals auto-rotated successors (32 bytes, hex). */
  RELAY_ENCRYPTION_KEY: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters"),
});

export type WorkerConfig = z.infer<typeof schema>;

export function loadWorkerConfig(env: Record<string, string | undefined>): WorkerConfig {
  return schema.parse(env);
}
