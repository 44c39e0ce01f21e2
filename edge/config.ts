import { z } from "zod";
import { listenHost, listenPort, parseEnv, sharedEnv } from "../core/env.ts";
import { parseCidr } from "../core/ip.ts";

const schema = z.object({
  RELAY_EDGE_HOST: listenHost,
  RELAY_EDGE_PORT: listenPort(8787),
  RELAY_CONTROL_URL: z.url().default("http://127.0.0.1:8788"),
  /**
   * A worker's listener (its RELAY_WORKER_PORT, or a balancer in front of several): sync calls
   * go to it first, answered sooner (workflows/sync-calls.ts). Unset: through Temporal only.
   */
  RELAY_WORKER_URL: z.url().optional(),
  RELAY_EDGE_DOMAIN: sharedEnv.RELAY_EDGE_DOMAIN,
  RELAY_EDGE_TOKEN: sharedEnv.RELAY_EDGE_TOKEN,
  RELAY_MAX_BODY_BYTES: sharedEnv.RELAY_MAX_BODY_BYTES,
  /** Sync calls one project may have in flight on this edge; over it, 503 with Retry-After. */
  RELAY_SYNC_MAX_PER_PROJECT: z.coerce.number().int().min(1).default(100),
  /** Connections to Temporal's HTTP API for starts (Node); sync long polls have their own. */
  RELAY_TEMPORAL_CONNECTIONS: z.coerce.number().int().min(1).default(128),
  /**
   * Workflow starts for callers (async, sync) in flight on this edge. A call finding them all
   * taken waits RELAY_TEMPORAL_START_WAIT_MS at most, then is 503 with Retry-After: a burst
   * beyond what Temporal takes is refused at once instead of queueing without bound.
   */
  RELAY_TEMPORAL_MAX_STARTS: z.coerce.number().int().min(1).default(64),
  RELAY_TEMPORAL_START_WAIT_MS: z.coerce.number().int().min(0).max(10_000).default(250),
  /**
   * How long a workflow start may wait for Temporal's answer: past it the start is given up
   * (its caller gets 503, an accepted call's start is left to the sweep), its slot freed. A
   * Temporal that hangs holds no caller longer.
   */
  RELAY_TEMPORAL_START_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /**
   * Under load, up to this many deliveries of a project's immediate async calls share one
   * workflow (edge/batcher.ts); 1 gives each call its own. At most 64: the batch's search
   * attribute lists their ids, and Temporal limits a value to 2 KB.
   */
  RELAY_BATCH_MAX_ITEMS: z.coerce.number().int().min(1).max(64).default(64),
  /**
   * How long a batch at most half full waits, once its calls are answered, for the calls
   * gathering behind it to join it (edge/batcher.ts); 0: never.
   */
  RELAY_BATCH_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(12),
  /** How long the edge serves from cache without the control plane's change stream. */
  RELAY_EDGE_LEASE_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  /**
   * A change stream silent this long is a dead connection: dropped and followed again. The
   * control plane sends a batch at least every second.
   */
  RELAY_EDGE_WATCH_IDLE_MS: z.coerce.number().int().min(1500).default(3000),
  /** Names this edge in the control plane's leases; random per process unless set. */
  RELAY_EDGE_ID: z.string().min(1).optional(),
  /** Comma-separated CIDRs of proxies whose X-Forwarded-For is believed. */
  RELAY_TRUSTED_PROXIES: z
    .string()
    .default("")
    .transform((text, ctx) =>
      text
        .split(",")
        .map((part) => part.trim())
        .filter(Boolean)
        .flatMap((part) => {
          const cidr = parseCidr(part);
          if (!cidr) ctx.addIssue({ code: "custom", message: `not a CIDR: ${part}` });
          return cidr ?? [];
        }),
    ),
  /** "1" lets stream targets be private, loopback or link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: sharedEnv.RELAY_ALLOW_PRIVATE_TARGETS,
  /** Other edges' listeners; this edge's own (RELAY_EDGE_HOST:RELAY_EDGE_PORT) counts anyway. */
  RELAY_EDGE_LISTENERS: sharedEnv.RELAY_EDGE_LISTENERS,
  /** A request body still arriving after this long is refused with 408. */
  RELAY_BODY_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  RELAY_METRICS_TOKEN: sharedEnv.RELAY_METRICS_TOKEN,
  OTEL_EXPORTER_OTLP_ENDPOINT: sharedEnv.OTEL_EXPORTER_OTLP_ENDPOINT,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sharedEnv.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  TEMPORAL_HTTP_ADDRESS: sharedEnv.TEMPORAL_HTTP_ADDRESS,
  TEMPORAL_NAMESPACE: sharedEnv.TEMPORAL_NAMESPACE,
  /** Temporal Cloud API key, sent as a bearer token to the HTTP API. */
  TEMPORAL_API_KEY: sharedEnv.TEMPORAL_API_KEY,
  TEMPORAL_TLS_CA: sharedEnv.TEMPORAL_TLS_CA,
});

export type EdgeConfig = z.infer<typeof schema>;

/** Runtime-neutral: each adapter passes its own environment (process.env, Deno.env). */
export function loadEdgeConfig(env: Record<string, string | undefined>): EdgeConfig {
  return parseEnv(schema, env);
}
