/**
 * deliverBatch: under load, one workflow for a project's immediate async calls (the edge's
 * batcher, edge/batcher.ts). It makes their first attempts in one local activity, in its first
 * workflow task, as a lone request's workflow does; ordered ones in their lanes' turns
 * (./batch-lanes.ts). One that waits only for limited targets' room, a retry a minute away or
 * less, a full share of the worker, or its lane's turn (10 minutes at most), waits in the batch
 * (./batch-holds.ts); one that needs more (a longer retry, a target's circuit or pause, a
 * cancel) continues as its own deliverRequest workflow, id = request id, from the verdicts the
 * batch got: retried, held, cancellable and replayable as any other. The batch's
 * RelayRequestIds search attribute finds it from any of its requests.
 */
import {
  ParentClosePolicy,
  patched,
  proxyLocalActivities,
  startChild,
  workflowInfo,
} from "@temporalio/workflow";
import type { DeliveryBatch, DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import { DELIVERY_WORKFLOW, fairnessOf, requestSearchAttributeLists } from "../core/temporal.ts";
import type { Activities } from "./activities.ts";
import { type InBatch, waitInBatch, waitsInBatch } from "./batch-holds.ts";
import { callBackEnds } from "./callbacks.ts";
import { type WaitLeft, waitForTheirTime } from "./delays.ts";
import {
  asyncDeliveries,
  type BatchedFirst,
  type FirstAttempt,
  goesOn,
  targetIdsOf,
} from "./deliveries.ts";
import { raise, requestFailed } from "./notifications.ts";

/** Room beyond the slowest target's timeout, and a slot's wait, for the log's writes. */
const BATCH_SLACK_MS = 15_000;

/** Answers how many of its requests continue as workflows of their own. */
export async function deliverBatch(batch: DeliveryBatch): Promise<number> {
  const longest = Math.max(
    0,
    ...batch.requests.flatMap((request) => request.targets.map((t) => t.timeoutSeconds)),
  );
  const { firstAttemptsOfBatch } = proxyLocalActivities<Activities>({
    startToCloseTimeout: longest * 1000 + BATCH_SLACK_MS,
    retry: { maximumAttempts: 1 },
  });
  let alone = 0;
  // Delayed ones wait for their time here first (./delays.ts); a cancel hands one on.
  const requests = await waitForTheirTime(batch.requests, async (request, waitLeftMs) => {
    alone++;
    await continueAlone(batch.project, { ...request, waitLeftMs });
  });
  if (requests.length === 0) return alone;
  // Failed as a whole (the worker's database, say): every request goes on as its own.
  const firsts = await firstAttemptsOfBatch(batch.project, requests).catch(
    (): (BatchedFirst | null)[] => [],
  );
  const outcomes = requests.map((request, i) => ({ request, first: firsts[i] ?? null }));
  const holding = patched(HOLD_IN_BATCH);
  // Asked only once a request goes on: a batch its attempts ended records no marker.
  const forTime = () => patched(WAIT_IN_BATCH_FOR_TIME);
  // Batches begun before carried their ordered requests' lanes handed an ordered one on to wait.
  const carriesLanes = () => patched(CARRIES_LANES);
  const goOn = async (request: DeliveryInput, verdicts?: (FirstAttempt | null)[]) => {
    alone++;
    // Its lane's entries are its own workflow's now: a turn given them is not told to the batch.
    if (request.ordering && carriesLanes()) {
      await releaseCarried(workflowInfo().workflowId, [request.requestId]);
    }
    await continueAlone(batch.project, request, verdicts);
  };
  const held: InBatch[] = [];
  // A plain loop, not an async function per request: Temporal's sandbox records a source-mapped
  // stack for every promise a workflow makes, and a delivered request needs none.
  const goingOn: Promise<void>[] = [];
  for (const { request, first } of outcomes) {
    if (first && "settled" in first) {
      if (first.settled !== "delivered") goingOn.push(settled(request, first.settled));
    } else if (first && "inLane" in first) {
      const verdicts = asyncDeliveries(request).map(() => null);
      held.push({ request, verdicts, inLane: first.inLane });
    } else if (
      holding &&
      first &&
      (!request.ordering || carriesLanes()) &&
      first.verdicts.some(goesOn) &&
      waitsInBatch(first.verdicts, forTime())
    ) {
      held.push({ request, verdicts: first.verdicts });
    } else {
      goingOn.push(goOn(request, first?.verdicts));
    }
  }
  if (goingOn.length > 0) await Promise.all(goingOn);
  if (held.length > 0) {
    await waitInBatch(
      batch.project,
      held,
      async ({ request, verdicts }) => {
        if (verdicts.some(goesOn)) return goOn(request, verdicts);
        const [only] = verdicts;
        const status = only && "settled" in only && only.settled;
        await settled(
          request,
          status || (await settleRequest(request.requestId, targetIdsOf(asyncDeliveries(request)))),
        );
      },
      forTime(),
    );
  }
  return alone;
}

/** Batches begun before they held their throttled requests hand them all on (Temporal's patching). */
const HOLD_IN_BATCH = "hold-in-batch";
/** Batches begun before they kept requests waiting briefly for time hand them on (retries, busy). */
const WAIT_IN_BATCH_FOR_TIME = "wait-in-batch-for-time";
/** Batches begun before they carried their ordered requests in their lanes hand them on. */
const CARRIES_LANES = "batch-carries-lanes";

const { settleRequest, releaseCarried } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "10 seconds",
  retry: { maximumInterval: "1 minute" },
});

/** A request the batch ended: failed ones raise their notification, once; its callbacks go. */
async function settled(request: DeliveryInput, status: RequestStatus): Promise<void> {
  if (status !== "delivered") await raise(requestFailed(request, status, request.requestId));
  await callBackEnds(request, targetIdsOf(asyncDeliveries(request)));
}

/** Goes on as the request's own workflow, id = request id, from the verdicts the batch got. */
async function continueAlone(
  project: string,
  request: DeliveryInput & WaitLeft,
  verdicts?: (FirstAttempt | null)[],
): Promise<void> {
  await startChild(DELIVERY_WORKFLOW, {
    workflowId: request.requestId,
    args: [{ ...request, fromBatch: true, ...(verdicts && { firstAttempts: verdicts }) }],
    // It outlives the batch: the batch ends once every request is settled or handed on.
    parentClosePolicy: ParentClosePolicy.ABANDON,
    searchAttributes: requestSearchAttributeLists(request, "delivering"),
    priority: fairnessOf(project),
  });
}
