/** Pieces of environment parsing that every process's config module shares. */
import { z } from "zod";
import { parseListeners } from "./listeners.ts";
import { defaultWaitingCaps } from "./waiting.ts";

/** A setting that is missing or bad: one line per variable, each naming it. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/**
 * A process's environment through its schema; every refusal is a ConfigError, which `relay`
 * prints as it is (cli/relay.ts). A variable's own message that names it is kept whole.
 */
export function parseEnv<T extends z.ZodType>(
  schema: T,
  env: Record<string, string | undefined>,
): z.output<T> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const variable = issue.path.join(".");
    if (env[variable] === undefined && issue.code === "invalid_type")
      return `${variable} is not set`;
    return issue.message.startsWith(variable) ? issue.message : `${variable}: ${issue.message}`;
  });
  throw new ConfigError(lines.join("\n"));
}

/** An on/off variable: "1" or "true" is on; unset, empty, "0" or "false" is off. */
export const envFlag = z
  .enum(["0", "1", "true", "false", ""])
  .default("")
  .transform((value) => value === "1" || value === "true");

/** A port to listen on, 0 for any free one. */
export const listenPort = (fallback: number) =>
  z.coerce.number().int().min(0).max(65535).default(fallback);

/** Listeners stay on loopback unless told otherwise. */
export const listenHost = z.string().default("127.0.0.1");

/** The key that seals secrets at rest: 32 bytes written as 64 hex characters. */
export const ENCRYPTION_KEY_HEX = /^[0-9a-fA-F]{64}$/;

/**
 * The variables more than one process reads, defined once so that each is parsed, defaulted and
 * refused (with the same message) alike in every process's config module.
 */
export const sharedEnv = {
  DATABASE_URL: z.url(),
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233"),
  /** Temporal's HTTP API (the frontend's HTTP port): the edge's starts, the control plane's sweep. */
  TEMPORAL_HTTP_ADDRESS: z.url().default("http://127.0.0.1:7243"),
  TEMPORAL_NAMESPACE: z.string().default("default"),
  /** Temporal Cloud API key: a TLS connection's credential, or the HTTP API's bearer token. */
  TEMPORAL_API_KEY: z.string().optional(),
  /**
   * A PEM file of the CA that signed the Temporal frontend's certificate: set, gRPC and the HTTP
   * API are reached over TLS trusting it (beside the system's roots, for the HTTP API).
   */
  TEMPORAL_TLS_CA: z.string().min(1).optional(),
  RELAY_EDGE_TOKEN: z.string().min(32, "RELAY_EDGE_TOKEN must be at least 32 characters"),
  RELAY_ENCRYPTION_KEY: z
    .string()
    .regex(ENCRYPTION_KEY_HEX, "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters"),
  /**
   * The payload codec's secrets (core/payload-codec.ts), 64 hex characters each, comma-separated,
   * newest first: the first seals what Relay hands Temporal, all of them open. Unset, the codec
   * uses RELAY_ENCRYPTION_KEY alone; to rotate, put a new secret before it.
   */
  RELAY_PAYLOAD_KEYS: z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined || text.trim() === "") return undefined;
      const secrets = text.split(",").map((part) => part.trim());
      if (!secrets.every((secret) => ENCRYPTION_KEY_HEX.test(secret))) {
        ctx.addIssue({
          code: "custom",
          message: "must be 64-hex-character secrets, comma-separated",
        });
      }
      return secrets;
    }),
  /**
   * The inbound domain (`host[:port]`): the edge serves only `{project}.{host}`, and its mark in
   * deliveries' CDN-Loop is this; no target may point under it.
   */
  RELAY_EDGE_DOMAIN: z.string().min(1).default("localhost:8787"),
  /**
   * Where the edges listen (`host:port`, comma-separated; core/listeners.ts): no delivery may
   * connect there. The default is the edge's own default listener.
   */
  RELAY_EDGE_LISTENERS: z
    .string()
    .default("127.0.0.1:8787")
    .transform((text, ctx) => {
      const specs = parseListeners(text);
      if (!specs)
        ctx.addIssue({ code: "custom", message: "must be host:port pairs, comma-separated" });
      return specs ?? [];
    }),
  /** The edges' inbound body cap. */
  RELAY_MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(5 * 1024 * 1024),
  /** Each plan's cap on a project's scheduled and held deliveries (core/waiting.ts). */
  RELAY_MAX_WAITING_DELIVERIES_FREE: z.coerce
    .number()
    .int()
    .min(0)
    .default(defaultWaitingCaps.free),
  RELAY_MAX_WAITING_DELIVERIES_PAID: z.coerce
    .number()
    .int()
    .min(0)
    .default(defaultWaitingCaps.paid),
  /** When set, GET /metrics needs it as a bearer token; unset, only loopback peers may scrape. */
  RELAY_METRICS_TOKEN: z.string().min(1).optional(),
  /** "1" lets targets be private, loopback and link-local addresses (dev stacks, tests). */
  RELAY_ALLOW_PRIVATE_TARGETS: envFlag,
  /** "1": the control plane's dev clock (and its admin routes) stand in for real time. */
  RELAY_DEV_CLOCK: envFlag,
  /** An OTLP/HTTP collector: set, the process exports its traces (core/telemetry.ts). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  /** The same for traces alone, as a full URL (`.../v1/traces`). */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url().optional(),
};

/** The plans' caps on waiting deliveries, as the config modules parsed them. */
export function waitingCapsFrom(config: {
  RELAY_MAX_WAITING_DELIVERIES_FREE: number;
  RELAY_MAX_WAITING_DELIVERIES_PAID: number;
}) {
  return {
    free: config.RELAY_MAX_WAITING_DELIVERIES_FREE,
    paid: config.RELAY_MAX_WAITING_DELIVERIES_PAID,
  };
}

/** The payload codec's secrets, newest first: RELAY_PAYLOAD_KEYS, else RELAY_ENCRYPTION_KEY. */
export function payloadSecretsFrom(config: {
  RELAY_PAYLOAD_KEYS?: string[] | undefined;
  RELAY_ENCRYPTION_KEY?: string | undefined;
}): string[] {
  return (
    config.RELAY_PAYLOAD_KEYS ?? (config.RELAY_ENCRYPTION_KEY ? [config.RELAY_ENCRYPTION_KEY] : [])
  );
}
