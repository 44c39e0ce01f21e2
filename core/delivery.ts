/**
 * What the edge hands the delivery workflow, and how a target's answer is classified. Plain JSON
 * only: it crosses Temporal's HTTP API and the workflow sandbox.
 */
import type { CreditHold } from "./billing.ts";
import type { Callbacks } from "./callbacks.ts";
import type { LaneRef } from "./lanes.ts";
import type { DeliveryTarget, KeyMode, RequestStatus } from "./model.ts";

export interface DeliveryInput {
  requestId: string;
  project: string;
  line: string;
  endpoint: string;
  keyMode: KeyMode;
  receivedAt: string;
  /** Caller headers safe to pass on (never Authorization). */
  headers: Record<string, string>;
  /** The body's exact bytes in base64, or "" when it travels by reference (`bodyRef`). */
  bodyBase64: string;
  /**
   * Inputs queued before bodies travelled in base64 (still retrying, or replayed from history)
   * carry the body as text here instead.
   */
  body?: string;
  /** Set for a body too large to travel inline (`bodyTravelsInline`), stored in Postgres. */
  bodyRef?: string;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  /**
   * A delayed call's time (RFC 3339, on the stack's clock, as `receivedAt`): its workflow waits
   * until then (core/schedule.ts). Absent for a call delivered at once, and for a replay.
   */
  notBefore?: string;
  /** The W3C trace the call's spans belong to, when the edge traces (the request log keeps it). */
  traceId?: string;
  /** The caller's Idempotency-Key, when it sent one (the request log keeps it, to find by). */
  idempotencyKey?: string;
  /**
   * Header names any of the endpoint's targets marks secret: forwarded, never kept in the
   * request log. Absent when none is.
   */
  secretHeaders?: string[];
  /** Sent again from the request log: the request this one was sent again from. */
  resentFrom?: string;
  /**
   * A replay's number (1 for a request's first): its deliveries hold and are charged apart from
   * the call's and the other replays'. Absent for the call itself.
   */
  replay?: number;
  /**
   * An ordered endpoint's call (core/lanes.ts): the lane it queues in, per async target, behind
   * the calls of the same key accepted before it. Absent on an unordered endpoint.
   */
  ordering?: LaneRef;
  /** Targets of the endpoint the call skips (their filters do not match it); absent when none. */
  skipped?: SkippedTarget[];
  /** Where to tell each async target's delivery's end (core/callbacks.ts); absent when not asked. */
  callbacks?: Callbacks;
  targets: DeliveryTarget[];
}

/**
 * Why a call skipped a target: its filter does not match the call (core/filter.ts), or its
 * transformation dropped it (core/transform.ts).
 */
export type SkipReason = "filter" | "transform";

/** A target a call skipped: not delivered to, not charged; the request log says why. */
export interface SkippedTarget {
  targetId: string;
  targetName: string;
  reason: SkipReason;
}

/** The targets a call skipped (its filters, unless said), as the log has them. */
export function skippedTargets(
  targets: readonly { id: string; name: string }[],
  reason: SkipReason = "filter",
): SkippedTarget[] {
  return targets.map((t) => ({ targetId: t.id, targetName: t.name, reason }));
}

/**
 * Immediate async calls of one project that one workflow delivers together, under load
 * (edge/batcher.ts): it makes their first attempts, and each request that needs more continues
 * as its own delivery workflow (id = request id).
 */
export interface DeliveryBatch {
  project: string;
  requests: DeliveryInput[];
}

/** What an accepted async call answers (202): queued, or scheduled when it waits for its time. */
export type Accepted = Extract<RequestStatus, "queued" | "scheduled">;

export function acceptedStatus(input: Pick<DeliveryInput, "notBefore">): Accepted {
  return input.notBefore ? "scheduled" : "queued";
}

/** Temporal warns at 256 KiB per payload and refuses 2 MB; larger bodies go by reference. */
export const INLINE_BODY_BYTES = 256 * 1024;

/**
 * How much inline body one workflow may carry in all: its input holds the body once and each
 * of its delivery activities' inputs once more, and Temporal refuses a workflow task whose
 * commands pass 4 MB (a body of 256 KiB to 16 targets would).
 */
export const INLINE_BODIES_BUDGET = 1024 * 1024;

/**
 * Whether a body of `bodyBytes` travels inside a workflow that delivers it to `asyncTargets`
 * targets (a sync call is one more copy at most); otherwise it waits in Postgres by reference.
 */
export function bodyTravelsInline(bodyBytes: number, asyncTargets: number): boolean {
  const encoded = Math.ceil(bodyBytes / 3) * 4;
  const copies = 1 + Math.max(1, asyncTargets);
  return bodyBytes <= INLINE_BODY_BYTES && encoded * copies <= INLINE_BODIES_BUDGET;
}

/**
 * A delivery attempt heartbeats this often while it waits on its target, and Temporal counts it
 * lost after three missed beats, so an attempt whose worker died is retried within seconds
 * rather than after its whole timeout.
 */
export const ATTEMPT_HEARTBEAT_MS = 5000;

/** The failure type of an answer not worth retrying; the delivery retry policy names it. */
export const TARGET_REJECTED = "TargetRejected" as const;

/** Statuses worth another attempt: the target may answer differently later. */
const RETRYABLE_STATUSES = new Set([408, 425, 429]);

export type AttemptOutcome = "delivered" | "retry" | "failed";

export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return "delivered";
  if (RETRYABLE_STATUSES.has(status) || status >= 500) return "retry";
  return "failed";
}

/** How deliveries back off between attempts (Temporal's retry policy). */
export interface Backoff {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
}

/** The policy's own wait after failed attempt `attempt` (1 for the first), as Temporal computes it. */
export function backoffMs(attempt: number, backoff: Backoff): number {
  const grown = backoff.initialIntervalMs * backoff.backoffCoefficient ** (attempt - 1);
  return Math.min(grown, backoff.maximumIntervalMs);
}

/**
 * The wait before the next attempt: a target's Retry-After may postpone it, never hasten it
 * past the backoff's own, so `Retry-After: 0` cannot turn the backoff into a tight loop.
 */
export function nextRetryDelayMs(
  retryAfter: number | null,
  attempt: number,
  backoff: Backoff,
): number {
  return Math.max(retryAfter ?? 0, backoffMs(attempt, backoff));
}

/**
 * What one attempt at an async target came to: delivered, skipped (its transformation dropped the
 * call), failed for good, or tried again later.
 */
export type AttemptVerdict =
  | { kind: "delivered"; status: number }
  | { kind: "skipped" }
  | {
      kind: "failed";
      type: "TargetRejected" | "TargetRefused" | typeof TRANSFORM_FAILED | typeof RETRIES_SPENT;
      message: string;
    }
  | { kind: "retry"; type: "TargetRetry" | "TargetUnreachable"; message: string; delayMs: number };

/** What an attempt saw: the target's status and Retry-After, or why there was no answer. */
export interface AttemptSeen {
  status: number | null;
  retryAfter: string | null;
  error: string | null;
  /** The target's address is one the rules refuse: never worth another try. */
  refused: boolean;
  /**
   * Its transformation dropped the call, or failed: the target was not called. A failure is its
   * owner's code's, so another try would fail alike; it fails for good, into the failure queue.
   */
  transform?: "dropped" | "failed";
}

/** The failure type of a delivery whose target's transformation failed (core/transform.ts). */
export const TRANSFORM_FAILED = "TransformFailed" as const;

/** A retryable failure at a target whose attempts are spent (its `retry.maxAttempts`). */
export const RETRIES_SPENT = "TargetRetriesSpent" as const;

/**
 * The verdict on attempt number `attempt` (1 for the first), retries timed by `backoff`; one that
 * would be retried fails for good when it was the last of `maxAttempts`.
 */
export function attemptVerdict(
  seen: AttemptSeen,
  attempt: number,
  backoff: Backoff & { maxAttempts?: number | undefined },
  now: Date,
): AttemptVerdict {
  const verdict = verdictOnce(seen, attempt, backoff, now);
  if (verdict.kind !== "retry" || attempt < (backoff.maxAttempts ?? Number.POSITIVE_INFINITY)) {
    return verdict;
  }
  const message = `${verdict.message}; that was its last attempt (${backoff.maxAttempts})`;
  return { kind: "failed", type: RETRIES_SPENT, message };
}

function verdictOnce(
  seen: AttemptSeen,
  attempt: number,
  backoff: Backoff,
  now: Date,
): AttemptVerdict {
  if (seen.transform === "dropped") return { kind: "skipped" };
  if (seen.transform === "failed") {
    return { kind: "failed", type: TRANSFORM_FAILED, message: `${seen.error}` };
  }
  if (seen.refused) return { kind: "failed", type: "TargetRefused", message: `${seen.error}` };
  if (seen.status === null) {
    return {
      kind: "retry",
      type: "TargetUnreachable",
      message: `target unreachable: ${seen.error}`,
      delayMs: backoffMs(attempt, backoff),
    };
  }
  const outcome = classifyStatus(seen.status);
  if (outcome === "delivered") return { kind: "delivered", status: seen.status };
  const message = `target answered ${seen.status}`;
  if (outcome === "failed") return { kind: "failed", type: TARGET_REJECTED, message };
  return {
    kind: "retry",
    type: "TargetRetry",
    message,
    delayMs: nextRetryDelayMs(retryAfterMs(seen.retryAfter, now), attempt, backoff),
  };
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
  | { kind: "too_large" }
  /** Not called: the project had its share of the worker's sync calls in flight. */
  | { kind: "busy" }
  /** Not called: its pool had too few credits left for it (`SyncInput.holds`). */
  | { kind: "refused" }
  /** Not called: its transformation dropped the call. */
  | { kind: "skipped" }
  /** Not called: its transformation failed (the reason in the log and the answer). */
  | { kind: "transform_failed"; error: string };

/** How much of a target's answer body the request log keeps per attempt. */
export const LOGGED_ANSWER_BYTES = 64 * 1024;

/** A sync answer travels through Temporal's history, which refuses payloads past 2 MB. */
export const MAX_SYNC_ANSWER_BYTES = 1024 * 1024;

/**
 * The status of a request whose one target was called once (sync, stream): delivered when it
 * answered 2xx, as an async attempt would be; null is no answer.
 */
export function answeredStatus(statusCode: number | null): "delivered" | "failed" {
  return statusCode !== null && classifyStatus(statusCode) === "delivered" ? "delivered" : "failed";
}

export function syncStatus(outcome: SyncOutcome): "delivered" | "failed" | "skipped" {
  if (outcome.kind === "skipped") return "skipped";
  return answeredStatus(outcome.kind === "answered" ? outcome.status : null);
}

/** A request as a call to one of its targets carries it: the delivery input, less its targets. */
export type RequestInput = Omit<DeliveryInput, "targets">;

export interface SyncInput extends RequestInput {
  target: DeliveryTarget;
  /** Mixed mode: the async workflow owns the request's status; this one only logs its attempt. */
  ownsStatus: boolean;
  /**
   * The credits the worker reserves before it calls, for a call with no other target: its edge
   * asked the control plane nothing, one round trip fewer on the caller's wait. Absent when the
   * edge reserved (mixed mode) or the pool is unmetered.
   */
  holds?: CreditHold[];
}

/** A stream call as the edge starts it: the body and the caller's headers stay with the edge. */
export type StreamStart = Omit<SyncInput, "headers" | "bodyBase64">;

/** How a stream ended. */
export interface StreamEnd {
  /** Null when the target was never reached. */
  statusCode: number | null;
  latencyMs: number;
  /** What reached the caller, heartbeats excluded: the billed size. */
  bytes: number;
  error: string | null;
}

/** A finished stream, as the edge reports it for the request log and billing. */
export interface StreamRecord extends StreamStart, StreamEnd {}

/** A call every target skipped, as the edge reports it for the request log: nothing queued. */
export type SkippedRecord = Pick<
  DeliveryInput,
  "requestId" | "project" | "line" | "endpoint" | "keyMode" | "receivedAt" | "bodyBytes"
> &
  Pick<DeliveryInput, "traceId" | "idempotencyKey"> & { skipped: SkippedTarget[] };

/** Where a worker takes the sync calls edges hand it (workflows/sync-calls.ts). */
export const SYNC_CALLS_PATH = "/v1/sync-calls";

/**
 * How long a sync call may take in all: its target's timeout, and room for the workflow task
 * around it. Its workflow's execution timeout, and the longest anyone waits for its answer.
 */
export function syncBudgetSeconds(target: { timeoutSeconds: number }): number {
  return target.timeoutSeconds + 10;
}

/** A sync call's workflow id: the request id, unless async targets' workflow holds it. */
export function syncWorkflowId(input: { requestId: string; ownsStatus: boolean }) {
  return input.ownsStatus ? input.requestId : `${input.requestId}-sync`;
}
