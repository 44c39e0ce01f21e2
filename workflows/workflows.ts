/**
 * Relay's workflows: orchestration only, deterministic; the I/O is in activities.ts.
 * - deliverRequest: one per request (workflow id = request id), one activity per async target.
 * - relaySync: one per sync call; the edge waits for its result.
 * - recordStream: logs and bills a stream the edge proxied.
 * - rotateKeys: the daily auto-rotation, started by a Schedule.
 * - pruneRequestLog: the daily log retention, started by a Schedule.
 */
import { defineSearchAttributeKey } from "@temporalio/common";
import {
  proxyActivities,
  proxyLocalActivities,
  upsertSearchAttributes,
} from "@temporalio/workflow";
import type { Pruned } from "../control/api/retention.ts";
import {
  ATTEMPT_HEARTBEAT_MS,
  type DeliveryInput,
  type StreamRecord,
  type SyncInput,
  type SyncOutcome,
  syncStatus,
  TARGET_REJECTED,
} from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import { searchAttributes } from "../core/temporal.ts";
import type { Activities, RetryPolicy } from "./activities.ts";

/** The request log's bookkeeping: quick writes, so one lost with its worker is retried soon. */
const { openRequest, settleRequest } = proxyActivities<Activities>({
  startToCloseTimeout: "10 seconds",
  retry: { maximumInterval: "1 minute" },
});

const { rotateExpiringKeys, pruneExpiredRequests } = proxyActivities<Activities>({
  startToCloseTimeout: "1 minute",
  retry: { maximumInterval: "1 minute" },
});

/** The worker's configured retry policy, read once per run (a local activity, so replay-safe). */
const { retryPolicy } = proxyLocalActivities<Activities>({ startToCloseTimeout: "5 seconds" });

/**
 * Deliveries retry with exponential backoff (by default from 1 s, at most 1 h apart, for 24 h);
 * an answer that is not worth retrying (most 4xx) fails at once.
 */
function deliveryActivities(policy: RetryPolicy) {
  return proxyActivities<Activities>({
    // An attempt lost with its worker is retried once its heartbeat stops, or this passes.
    startToCloseTimeout: policy.attemptTimeoutMs,
    heartbeatTimeout: 3 * ATTEMPT_HEARTBEAT_MS,
    scheduleToCloseTimeout: policy.windowMs,
    retry: {
      initialInterval: policy.initialIntervalMs,
      backoffCoefficient: policy.backoffCoefficient,
      maximumInterval: policy.maximumIntervalMs,
      nonRetryableErrorTypes: [TARGET_REJECTED],
    },
  });
}

const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");

/** Also runs a replay: the same input with only the targets that failed. */
export async function deliverRequest(input: DeliveryInput): Promise<RequestStatus> {
  const { targets, headers, bodyBase64, body, ...request } = input;
  const { deliver } = deliveryActivities(await retryPolicy());
  await openRequest(request);
  setStatus("delivering");
  await Promise.allSettled(
    targets
      .filter((target) => target.deliveryMode === "async")
      .map((target) =>
        deliver({
          requestId: input.requestId,
          project: input.project,
          keyMode: input.keyMode,
          target,
          headers,
          bodyBase64,
          ...(body !== undefined && { body }),
          bodyRef: input.bodyRef,
        }),
      ),
  );
  const status = await settleRequest(input.requestId);
  setStatus(status);
  return status;
}

/** Lets an operator filter by status in the Temporal UI. */
function setStatus(status: RequestStatus): void {
  upsertSearchAttributes([{ key: statusKey, value: status }]);
}

/** Sync calls are never retried; the target's own timeout bounds the activity. */
const { relaySyncCall } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "100 seconds",
  retry: { maximumAttempts: 1 },
});

export async function relaySync(input: SyncInput): Promise<SyncOutcome> {
  const outcome = await relaySyncCall(input);
  if (input.ownsStatus) setStatus(syncStatus(outcome));
  return outcome;
}

/** Bookkeeping for a stream the edge proxied; retried until it is written. */
const { recordStreamCall } = proxyActivities<Activities>({
  startToCloseTimeout: "30 seconds",
  retry: { maximumInterval: "1 minute" },
});

export async function recordStream(record: StreamRecord): Promise<void> {
  await recordStreamCall(record);
}

/** Returns how many successors it minted. */
export async function rotateKeys(): Promise<number> {
  return rotateExpiringKeys();
}

/** Returns how many requests and stored bodies left the log. */
export async function pruneRequestLog(): Promise<Pruned> {
  return pruneExpiredRequests();
}
