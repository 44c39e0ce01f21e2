import { z } from "zod";
import { listenHost, listenPort, parseEnv, sharedEnv } from "../core/env.ts";

const schema = z.object({
  DATABASE_URL: sharedEnv.DATABASE_URL,
  TEMPORAL_ADDRESS: sharedEnv.TEMPORAL_ADDRESS,
  TEMPORAL_NAMESPACE: sharedEnv.TEMPORAL_NAMESPACE,
  /** Temporal Cloud API key; when set, the connection uses TLS. */
  TEMPORAL_API_KEY: sharedEnv.TEMPORAL_API_KEY,
  TEMPORAL_TLS_CA: sharedEnv.TEMPORAL_TLS_CA,
  RELAY_RETRY_INITIAL_MS: z.coerce.number().int().min(1).default(1000),
  RELAY_RETRY_BACKOFF: z.coerce.number().min(1).default(2),
  RELAY_RETRY_MAX_INTERVAL_MS: z.coerce.number().int().min(1).default(3_600_000),
  RELAY_RETRY_WINDOW_MS: z.coerce.number().int().min(1000).default(86_400_000),
  /** One delivery attempt's limit; past it (a worker lost mid-call) Temporal retries. */
  RELAY_ATTEMPT_TIMEOUT_MS: z.coerce.number().int().min(1000).default(120_000),
  RELAY_MAX_WAITING_DELIVERIES_FREE: sharedEnv.RELAY_MAX_WAITING_DELIVERIES_FREE,
  RELAY_MAX_WAITING_DELIVERIES_PAID: sharedEnv.RELAY_MAX_WAITING_DELIVERIES_PAID,
  /** How long a finished request (its attempts, its stored body) stays in the log. */
  RELAY_LOG_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** "1" lets deliveries reach private, loopback and link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: sharedEnv.RELAY_ALLOW_PRIVATE_TARGETS,
  RELAY_EDGE_LISTENERS: sharedEnv.RELAY_EDGE_LISTENERS,
  /** "1": deliveries and rotations run on the control plane's dev clock; else on real time. */
  RELAY_DEV_CLOCK: sharedEnv.RELAY_DEV_CLOCK,
  /**
   * The worker's capacity and each project's share of it (docs/operations.md, "Sizing a
   * worker"): async attempts (first tries and retries), sync calls and notifications each have
   * slots of their own, and one project may hold at most its share of each on this worker.
   */
  RELAY_WORKER_ATTEMPT_SLOTS: z.coerce.number().int().min(1).max(10_000).default(200),
  RELAY_PROJECT_ATTEMPTS_IN_FLIGHT: z.coerce.number().int().min(1).max(10_000).default(10),
  RELAY_WORKER_SYNC_SLOTS: z.coerce.number().int().min(1).max(10_000).default(100),
  RELAY_PROJECT_SYNC_IN_FLIGHT: z.coerce.number().int().min(1).max(10_000).default(10),
  /** How long a batch of sync calls, answered, waits for its callers' next calls (./sync-calls.ts). */
  RELAY_SYNC_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(40),
  RELAY_WORKER_NOTIFICATION_SLOTS: z.coerce.number().int().min(1).max(10_000).default(20),
  RELAY_PROJECT_NOTIFICATIONS_IN_FLIGHT: z.coerce.number().int().min(1).max(10_000).default(2),
  /** How long a stopping worker lets its attempts in flight finish. */
  RELAY_WORKER_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(8000),
  /** Edges hand sync calls to the worker with their token (./sync-calls.ts); unset, it takes none. */
  RELAY_EDGE_TOKEN: sharedEnv.RELAY_EDGE_TOKEN.optional(),
  /** The worker's own listener: /healthz, /readyz, /metrics, and edges' sync calls. */
  RELAY_WORKER_HOST: listenHost,
  RELAY_WORKER_PORT: listenPort(8790),
  RELAY_METRICS_TOKEN: sharedEnv.RELAY_METRICS_TOKEN,
  OTEL_EXPORTER_OTLP_ENDPOINT: sharedEnv.OTEL_EXPORTER_OTLP_ENDPOINT,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sharedEnv.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  /** Seals auto-rotated successors (32 bytes, hex). */
  RELAY_ENCRYPTION_KEY: sharedEnv.RELAY_ENCRYPTION_KEY,
  RELAY_PAYLOAD_KEYS: sharedEnv.RELAY_PAYLOAD_KEYS,
  // "accept": histories from before the payload codec still deliver (docs/deployment.md).
  RELAY_UNSEALED_PAYLOADS: z.enum(["refuse", "accept"]).default("refuse"),
});

export type WorkerConfig = z.infer<typeof schema>;

/** A project's share may not exceed the pool it is a share of. */
const shares = [
  ["RELAY_PROJECT_ATTEMPTS_IN_FLIGHT", "RELAY_WORKER_ATTEMPT_SLOTS"],
  ["RELAY_PROJECT_SYNC_IN_FLIGHT", "RELAY_WORKER_SYNC_SLOTS"],
  ["RELAY_PROJECT_NOTIFICATIONS_IN_FLIGHT", "RELAY_WORKER_NOTIFICATION_SLOTS"],
] as const;

const checked = schema.superRefine((config, ctx) => {
  for (const [share, pool] of shares) {
    if (config[share] > config[pool]) {
      ctx.addIssue({ code: "custom", path: [share], message: `must be at most ${pool}` });
    }
  }
});

export function loadWorkerConfig(env: Record<string, string | undefined>): WorkerConfig {
  return parseEnv(checked, env);
}
