/**
 * What the edge hands the delivery workflow, and how a target's answer is classified. Plain JSON
 * only: it crosses Temporal's HTTP API and the workflow sandbox.
 */
import type { DeliveryMode, KeyMode } from "./model.ts";

export interface DeliveryTarget {
  id: string;
  name: string;
  targetUrl: string;
  deliveryMode: DeliveryMode;
  timeoutSeconds: number;
  headers: Record<string, string>;
}

export interface DeliveryInput {
  requestId: string;
  project: string;
  line: string;
  endpoint: string;
  keyMode: KeyMode;
  receivedAt: string;
  /** Caller headers safe to pass on (never Authorization). */
  headers: Record<string, string>;
  /** The body itself, or "" when it travels by reference (`bodyRef`). */
  body: string;
  /** Set for bodies over INLINE_BODY_BYTES, stored in Postgres (a claim check). */
  bodyRef?: string;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  targets: DeliveryTarget[];
}

/** Temporal warns at 256 KiB per payload and refuses 2 MB; larger bodies go by reference. */
export const INLINE_BODY_BYTES = 256 * 1024;

/**
 * A delivery attempt heartbeats this often while it waits on its target, and Temporal counts it
 * lost after three missed beats, so an attempt whose worker died is retried within seconds
 * rather than after its whole timeout.
 */
export const ATTEMPT_HEARTBEAT_MS = 5000;

/** The failure type of an answer not worth retrying; the delivery retry policy names it. */
export const TARGET_REJECTED = "TargetRejected";

/** Statuses worth another attempt: the target may answer differently later. */
const RETRYABLE_STATUSES = new Set([408, 425, 429]);

export type AttemptOutcome = "delivered" | "retry" | "failed";

export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return "delivered";
  if (RETRYABLE_STATUSES.has(status) || status >= 500) return "retry";
  return "failed";
}

/** `Retry-After` as seconds or an HTTP date, in milliseconds from `now`; null when absent or bad. */
export function retryAfterMs(header: string | null, now: Date): number | null {
  if (!header) return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now.getTime());
}

/** What a sync target's call came to, as the sync workflow returns it to the edge. */
export type SyncOutcome =
  | { kind: "answered"; status: number; headers: Record<string, string>; bodyBase64: string }
  | { kind: "timeout" }
  | { kind: "unreachable"; error: string }
  | { kind: "too_large" };

/** A sync answer travels through Temporal's history, which refuses payloads past 2 MB. */
export const MAX_SYNC_ANSWER_BYTES = 1024 * 1024;

/** A sync request is delivered when its target answered 2xx, as an async one would be. */
export function syncStatus(outcome: SyncOutcome): "delivered" | "failed" {
  return outcome.kind === "answered" && classifyStatus(outcome.status) === "delivered"
    ? "delivered"
    : "failed";
}

export interface SyncInput extends Omit<DeliveryInput, "targets"> {
  target: DeliveryTarget;
  /** Mixed mode: the async workflow owns the request's status; this one only logs its attempt. */
  ownsStatus: boolean;
}

/** A finished stream, as the edge reports it for the request log and billing. */
export interface StreamRecord extends Omit<SyncInput, "headers" | "body"> {
  /** Null when the target was never reached. */
  statusCode: number | null;
  latencyMs: number;
  /** What reached the caller, heartbeats excluded: the billed size. */
  bytes: number;
  error: string | null;
}

/** The workflow id of the call that answers the caller: the request id, unless async targets hold it. */
export function answeringWorkflowId(
  input: { requestId: string; ownsStatus: boolean },
  kind: "sync" | "stream",
) {
  return input.ownsStatus ? input.requestId : `${input.requestId}-${kind}`;
}
