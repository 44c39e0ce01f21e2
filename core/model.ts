/** The domain's vocabulary, shared by the control plane, the edge and the workflows. */
import type { Ordering } from "./lanes.ts";

export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** A project's slug is a DNS label: the first label of its inbound host. */
export const PROJECT_SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export function isProjectSlug(value: string): boolean {
  return PROJECT_SLUG.test(value);
}

export const plans = ["free", "paid"] as const;
export type Plan = (typeof plans)[number];

export const roles = ["owner", "editor"] as const;
export type Role = (typeof roles)[number];

export const keyModes = ["live", "test"] as const;
export type KeyMode = (typeof keyModes)[number];

export const deliveryModes = ["async", "sync", "stream"] as const;
export type DeliveryMode = (typeof deliveryModes)[number];

/** In the order of the proto enum RequestStatus (the Connect converters map by position). */
export const requestStatuses = [
  "queued",
  "delivering",
  "delivered",
  "partially_failed",
  "failed",
  "scheduled",
  "cancelled",
  "skipped",
] as const;
export type RequestStatus = (typeof requestStatuses)[number];

/** Statuses after which a request changes only by a replay (and leaves the log by retention). */
export const finishedStatuses: readonly RequestStatus[] = [
  "delivered",
  "partially_failed",
  "failed",
  "cancelled",
  "skipped",
];

/** One of an endpoint's targets: where and how a request to it is delivered. */
export interface DeliveryTarget {
  id: string;
  name: string;
  targetUrl: string;
  deliveryMode: DeliveryMode;
  timeoutSeconds: number;
  headers: Record<string, string>;
  /** Flow control (async deliveries): starts per second and attempts in flight at most. */
  maxDeliveriesPerSecond?: number | undefined;
  maxConcurrent?: number | undefined;
  /** Lowercase names of inbound headers never kept in the request log (still forwarded). */
  secretHeaders?: string[] | undefined;
  /** Which calls it receives (core/filter.ts); absent: every call. */
  filter?: JsonObject | undefined;
  /** A function `(request) => request` its calls go through (core/transform.ts); absent: none. */
  transform?: string | undefined;
  /** Its own retry policy (core/retry.ts); absent, or a setting left out: the deployment's. */
  retry?: TargetRetry | undefined;
}

/** A target's retry settings (core/retry.ts); every one optional. */
export interface TargetRetry {
  /** Attempts in all, the first included: past them a retryable failure fails for good. */
  maxAttempts?: number | undefined;
  initialIntervalSeconds?: number | undefined;
  backoffCoefficient?: number | undefined;
  maximumIntervalSeconds?: number | undefined;
  /** How long after the call its delivery is retried at most. */
  windowSeconds?: number | undefined;
}

/** When a target's circuit opens and disables it (its defaults and rules: core/circuit.ts). */
export interface CircuitBreaker {
  /** Failed attempts in a row that open the circuit. */
  failureThreshold: number;
  /** The run counts only while its first failure is at most this old. */
  windowSeconds: number;
  /** An open circuit past this disables the target. */
  disableAfterSeconds: number;
}

export interface RateLimit {
  requestsPerSecond: number;
  burst: number;
}

export interface Endpoint {
  line: string;
  path: string;
  targets: DeliveryTarget[];
  ipAllowlist: string[];
  schema: JsonObject | null;
  rateLimit: RateLimit | null;
  /** When its targets' circuits open and disable (core/circuit.ts); absent or null: defaults. */
  circuitBreaker?: CircuitBreaker | null;
  /** "fifo": async deliveries reach each target in accept order per key (core/lanes.ts). */
  ordering: Ordering;
  version: number;
  updatedAt: Date;
}

export interface Policy {
  defaultKeyTtlDays: number | null;
  maxKeyTtlDays: number | null;
  editorsMayCreateNonExpiringKeys: boolean;
}

/** What the edge needs to know about a key to decide on a call. */
export interface KeyRecord {
  id: string;
  project: string;
  mode: KeyMode;
  expiresAt: Date | null;
  revokedAt: Date | null;
  successorUsable: boolean;
}
