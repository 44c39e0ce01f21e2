/**
 * Relay's workflows: orchestration only, deterministic; the I/O is in activities.ts.
 * - deliverRequest: one per request (workflow id = request id): a delayed one waits for its
 *   time on a timer, then each async target's first attempt in one workflow task, then retries
 *   as activities; a cancel (Temporal's) stops it wherever it is.
 * - relaySync (sync.ts): one per sync call an edge starts; the edge waits for its result.
 * - relaySyncBatch (sync.ts): sync calls a worker gathered, answered by that worker.
 * - targetCircuit (circuit.ts): one per target while its deliveries wait for it.
 * - orderedLane (lanes-before.ts): a key's lane, as releases before lanes in Postgres ran it.
 * - sendNotification (notifications.ts): one per operational event.
 * - recordStream: logs and bills a stream an edge of an older release proxied.
 * - rotateKeys: the daily auto-rotation, started by a Schedule.
 * - pruneRequestLog: the daily log retention, started by a Schedule.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  workflowInfo,
} from "@temporalio/workflow";
import {
  ATTEMPT_HEARTBEAT_MS,
  type DeliveryInput,
  type StreamRecord,
  TARGET_REJECTED,
} from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import { retryScheduleOf } from "../core/retry.ts";
import { circuitWorkflowId } from "../core/temporal.ts";
import type { RetentionRun } from "../store/retention.ts";
import type { Activities } from "./activities.ts";
import type { RetryPolicy } from "./activity-deps.ts";
import { callBackEnds } from "./callbacks.ts";
import { timeToWait, type WaitLeft } from "./delays.ts";
import {
  asyncDeliveries,
  type DeliverInput,
  FIRST_ATTEMPT_SLACK_MS,
  type FirstAttempt,
  type RequestRow,
  retryingOf,
  targetIdsOf,
  type Waiting,
} from "./deliveries.ts";
import { type Lane, RequestLane } from "./lanes.ts";
import { raise, requestFailed } from "./notifications.ts";
import { probedSignal, releaseSignal } from "./signals.ts";
import { setStatus } from "./status.ts";

export { deliverBatch } from "./batch.ts";
export { sendCallback } from "./callbacks.ts";
export { targetCircuit } from "./circuit.ts";
export { orderedLane } from "./lanes-before.ts";
export { sendNotification } from "./notifications.ts";
export { recoverRequests } from "./recoveries.ts";
export { fireSchedule } from "./schedules.ts";
export { relaySync, relaySyncBatch } from "./sync.ts";

/** The request log's bookkeeping: quick writes, so one lost with its worker is retried soon. */
const bookkeeping = {
  startToCloseTimeout: "10 seconds",
  retry: { maximumInterval: "1 minute" },
} as const;
const { openRequest, settleRequest, cancelRequest, holdDelivery } =
  proxyActivities<Activities>(bookkeeping);
/** A delayed request is opened (scheduled) in the task that starts its wait. */
const openLocally = proxyLocalActivities<Activities>(bookkeeping);

const { rotateExpiringKeys, pruneExpiredRequests } = proxyActivities<Activities>({
  startToCloseTimeout: "1 minute",
  retry: { maximumInterval: "1 minute" },
});

/** The worker's configured retry policy, read once per run (a local activity, so replay-safe). */
const { retryPolicy } = proxyLocalActivities<Activities>({ startToCloseTimeout: "5 seconds" });

/**
 * First attempts are local activities: they run in the workflow task that started the request,
 * with no trip through Temporal's queues, and are not retried as such (a failed one is retried
 * as an activity, below). A worker that dies in one fails that task, and the next worker runs
 * the attempt again: still at least once.
 */
function firstAttempts(deliveries: DeliverInput[]) {
  const longest = Math.max(0, ...deliveries.map((d) => d.target.timeoutSeconds));
  return proxyLocalActivities<Activities>({
    startToCloseTimeout: longest * 1000 + FIRST_ATTEMPT_SLACK_MS,
    retry: { maximumAttempts: 1 },
  });
}

/**
 * Later attempts retry with exponential backoff (by default from 1 s, at most 1 h apart) until
 * the request's window (24 h by default) closes; an answer not worth retrying (most 4xx) fails
 * at once. Each attempt names its own next wait (the backoff, or a longer Retry-After).
 */
function deliveryActivities(policy: RetryPolicy, heldMs = 0, probe = false) {
  // Time spent waiting for the target (open circuit, pause) does not count against the window.
  const elapsedMs = Date.now() - workflowInfo().startTime.getTime() - heldMs;
  return proxyActivities<Activities>({
    // An attempt lost with its worker is retried once its heartbeat stops, or this passes.
    startToCloseTimeout: policy.attemptTimeoutMs,
    // A cancelled request's attempt in flight is aborted (its heartbeat learns of the cancel)
    // and logged before the request is marked cancelled, so nothing lands after that.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    heartbeatTimeout: 3 * ATTEMPT_HEARTBEAT_MS,
    scheduleToCloseTimeout: Math.max(policy.windowMs - elapsedMs, 1000),
    retry: {
      initialInterval: policy.initialIntervalMs,
      backoffCoefficient: policy.backoffCoefficient,
      maximumInterval: policy.maximumIntervalMs,
      nonRetryableErrorTypes: [TARGET_REJECTED],
      // A probe is one try: a failed one waits again, for the circuit's next probe.
      ...(probe && { maximumAttempts: 1 }),
    },
  });
}

/**
 * Also runs a replay: the same input with only the targets that failed. A request whose first
 * attempts all end (delivered, or failed for good) completes in its first workflow task. A
 * cancel (DELETE .../requests/{id}) ends it wherever it waits: its time, a retry's backoff, an
 * open attempt (aborted and logged first).
 */
export async function deliverRequest(input: ContinuedInput): Promise<RequestStatus> {
  const { targets, headers, bodyBase64, body, firstAttempts: _, ...request } = input;
  /** Releases received and not yet taken, by target: whether each came as a probe. */
  const released = new Map<string, boolean>();
  setHandler(releaseSignal, ({ targetId, probe }) => {
    released.set(targetId, probe);
  });
  const lane = RequestLane.of(input);
  try {
    const waitMs = timeToWait(input);
    if (waitMs > 0) {
      await openLocally.openRequest(request, "scheduled");
      await sleep(waitMs);
    }
    const status = await deliverAll(input, released, lane);
    if (status !== "delivered" && patched(NOTIFY_FAILED)) {
      // Once per request, once per replay (its workflow id is its own).
      await raise(requestFailed(input, status, workflowInfo().workflowId));
    }
    return status;
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // A 2xx that landed first wins: the log answers delivered (histories before that: nothing).
    return CancellationScope.nonCancellable(async () => {
      const targetIds = targetIdsOf(asyncDeliveries(input));
      await lane?.leaveAll(targetIds);
      return settle((await cancelRequest(request, targetIds)) ?? "cancelled");
    });
  }
}

/**
 * A request's input; from a batch (./batch.ts), also the verdicts of the first attempts the
 * batch made, by async target in order, so it goes on from there rather than try again.
 */
export interface ContinuedInput extends DeliveryInput, WaitLeft {
  firstAttempts?: (FirstAttempt | null)[];
  /** Handed on by a batch: a first attempt made here may have been made there (its activity lost). */
  fromBatch?: boolean;
}

/** The events before a workflow's first task runs: more, and that task was tried before. */
const FIRST_TASK_EVENTS = 3;

/** An ordered request's retries find it logged (histories begun before replay without it). */
const OPEN_BEFORE_LANE_RETRIES = "open-before-lane-retries";

/** Failed requests raise `request.failed` (histories begun before replay without it). */
const NOTIFY_FAILED = "notify-request-failed";

async function deliverAll(
  input: ContinuedInput,
  released: Map<string, boolean>,
  lane: Lane | null,
): Promise<RequestStatus> {
  const { targets, headers, bodyBase64, body, firstAttempts: madeInBatch, ...request } = input;
  const deliveries = asyncDeliveries(input);
  const first = firstAttempts(deliveries);
  // A first attempt that may have run before (a retried task: more events than a first task's,
  // or its batch's activity lost) skips a target the log shows delivered.
  const mayHaveRun = input.fromBatch === true || workflowInfo().historyLength > FIRST_TASK_EVENTS;
  // A first attempt that failed as a local activity (its writes to the log, say) is retried.
  const only = deliveries.length === 1;
  if (lane) {
    // Each target's series in its turn (./lanes.ts), its first attempt in the turn's own task;
    // the wait for the turn counts as held, not against the retry window.
    const policy = await retryPolicy();
    let settled: RequestStatus | undefined;
    await lane.inTurn(deliveries, async (delivery, waitedMs) => {
      // A batch that had the turn made the first attempt (../batch-attempts.ts).
      const verdict =
        madeInBatch?.[deliveries.indexOf(delivery)] ??
        (await first.firstAttempt(request, delivery, only, mayHaveRun).catch(() => null));
      if (verdict && "settled" in verdict) settled = verdict.settled;
      const next = retryingOf(delivery, verdict);
      if (next) {
        setStatus("delivering");
        // Logged before its retries, as an unordered request's is: a first attempt that found no
        // slot (busy) wrote nothing (histories begun before this open nothing here).
        if (patched(OPEN_BEFORE_LANE_RETRIES)) await openRequest(request);
        if (next.delayMs > 0) await sleep(next.delayMs);
        await deliverToTarget(delivery, policy, next.waiting, released, input.receivedAt, waitedMs);
      }
      await callBackEnds(input, [delivery.target.id]);
    });
    return settle(settled ?? (await settleRequest(input.requestId, targetIdsOf(deliveries))));
  }
  if (!madeInBatch && !patched(FIRST_ATTEMPTS_IN_FIRST_TASK)) {
    return deliverAsBefore(request, deliveries);
  }
  const verdicts =
    madeInBatch ??
    (await Promise.all(
      deliveries.map((delivery) =>
        first
          .firstAttempt(request, delivery, only, mayHaveRun)
          .catch((): FirstAttempt | null => null),
      ),
    ));
  const retrying = deliveries.flatMap((delivery, i) => retryingOf(delivery, verdicts[i]) ?? []);
  const goOn = new Set(retrying.map((r) => r.delivery.target.id));
  await callBackEnds(
    input,
    targetIdsOf(deliveries).filter((id) => !goOn.has(id)),
  );
  if (retrying.length === 0) {
    const [verdict] = verdicts;
    const settled = verdict && "settled" in verdict ? verdict.settled : undefined;
    return settle(settled ?? (await first.settleRequest(input.requestId, targetIdsOf(deliveries))));
  }

  setStatus("delivering");
  const policy = await retryPolicy();
  await openRequest(request);
  await Promise.allSettled(
    retrying.map(async ({ delivery, delayMs, waiting }) => {
      if (delayMs > 0) await sleep(delayMs);
      await deliverToTarget(delivery, policy, waiting, released, input.receivedAt);
      await callBackEnds(input, [delivery.target.id]);
    }),
  );
  return settle(await settleRequest(input.requestId, targetIdsOf(deliveries)));
}

/** How long a held delivery waits for its release before it looks again itself. */
const HOLD_RECHECK = "1 hour";

/**
 * Tries one target until the attempt series ends. While the target's deliveries wait (its
 * circuit open, a pause, its flow limits full) this one waits too, durably and without
 * attempts, until released; while its project's share of the worker is full, it waits on a
 * timer as long as the worker said and tries again. Neither wait counts against the retry window.
 */
async function deliverToTarget(
  delivery: DeliverInput,
  policy: RetryPolicy,
  waitingFirst: Waiting,
  released: Map<string, boolean>,
  /** When its request was accepted: its place among the target's held deliveries. */
  acceptedAt: string,
  /** Waited already, not counted against the retry window (an ordered delivery's turn). */
  heldBeforeMs = 0,
) {
  const targetId = delivery.target.id;
  const schedule = retryScheduleOf(policy, delivery.target.retry); // the target's, as accepted
  let waiting = waitingFirst;
  let heldMs = heldBeforeMs;
  for (;;) {
    let letGo: LetGo = { probe: false, fromQueue: false };
    const since = Date.now();
    // A first run of it still in flight elsewhere when this waited: the log says how it ended.
    const mayHaveLanded = waiting !== "held" && waiting?.mayHaveLanded === true;
    if (waiting === "held") letGo = await waitForTarget(targetId, acceptedAt, released);
    else if (waiting) await sleep(waiting.waitMs);
    heldMs += Date.now() - since;
    const { probe, fromQueue } = letGo;
    const { deliver } = deliveryActivities(schedule, heldMs, probe);
    const outcome = probe
      ? await deliver({ ...delivery, probe })
          .catch((error: unknown) => heldUnlessRejected(error))
          .finally(() => tellProbed(targetId))
      : await deliver({
          ...delivery,
          ...(fromQueue && { fromQueue }),
          ...(mayHaveLanded && { mayHaveLanded }),
        });
    if (typeof outcome === "number" || outcome === "skipped") return;
    waiting = outcome;
  }
}

/** How a held delivery was let go: as its open circuit's probe, or from its limited target's queue. */
interface LetGo {
  probe: boolean;
  fromQueue: boolean;
}

/**
 * Holds this delivery for its target until released (or nothing holds it any more when it
 * looks again); held deliveries go in the order their requests were accepted.
 */
async function waitForTarget(
  targetId: string,
  acceptedAt: string,
  released: Map<string, boolean>,
): Promise<LetGo> {
  released.delete(targetId);
  while (await holdDelivery(targetId, workflowInfo().workflowId, acceptedAt)) {
    if (await condition(() => released.has(targetId), HOLD_RECHECK)) {
      const probe = released.get(targetId) ?? false;
      released.delete(targetId);
      return { probe, fromQueue: !probe };
    }
  }
  return { probe: false, fromQueue: false };
}

/** A probe that failed waits again; one the target rejected for good (most 4xx) ends. */
function heldUnlessRejected(error: unknown): "held" {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) throw error;
  return "held";
}

async function tellProbed(targetId: string): Promise<void> {
  await getExternalWorkflowHandle(circuitWorkflowId(targetId))
    .signal(probedSignal)
    .catch(() => {}); // a circuit workflow that ended has nothing to learn
}

/**
 * Requests queued before first attempts moved into the first workflow task replay as they
 * began (Temporal's patching); remove once no such request can still be retrying (its window).
 */
const FIRST_ATTEMPTS_IN_FIRST_TASK = "first-attempts-in-first-task";

async function deliverAsBefore(
  request: RequestRow,
  deliveries: DeliverInput[],
): Promise<RequestStatus> {
  const { deliver } = deliveryActivities(await retryPolicy());
  await openRequest(request);
  setStatus("delivering");
  await Promise.allSettled(deliveries.map((delivery) => deliver(delivery)));
  return settle(await settleRequest(request.requestId, targetIdsOf(deliveries)));
}

function settle(status: RequestStatus): RequestStatus {
  setStatus(status);
  return status;
}

/**
 * Bookkeeping for a stream the edge proxied, retried until it is written. Edges now send their
 * stream records to the control plane (EdgeService.RecordStream: one write, where a workflow per
 * stream cost Temporal and the worker more than the stream itself); this stays so records queued
 * before an upgrade still finish. Remove once no edge of an older release can start one.
 */
const recordOptions = {
  startToCloseTimeout: "30 seconds",
  retry: { maximumInterval: "1 minute" },
} as const;
const recordLocally = proxyLocalActivities<Activities>(recordOptions);
const recordAsBefore = proxyActivities<Activities>(recordOptions);

/** Records begun as an activity (before the local one) replay as they began. */
const RECORD_IN_FIRST_TASK = "record-in-first-task";

export async function recordStream(record: StreamRecord): Promise<void> {
  const { recordStreamCall } = patched(RECORD_IN_FIRST_TASK) ? recordLocally : recordAsBefore;
  await recordStreamCall(record);
}

/** Returns how many successors it minted. */
export async function rotateKeys(): Promise<number> {
  return rotateExpiringKeys();
}

/** Returns how many requests and stored bodies left the log, and deleted projects swept. */
export async function pruneRequestLog(): Promise<RetentionRun> {
  return pruneExpiredRequests();
}
