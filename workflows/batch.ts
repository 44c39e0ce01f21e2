/**
 * deliverBatch: under load, one workflow for a project's immediate async calls (the edge's
 * batcher, edge/batcher.ts). It makes their first attempts in one local activity, in its first
 * workflow task, as a lone request's workflow does; each request that needs more (a retry, a
 * target that waits, a full share of the worker) continues as its own deliverRequest workflow,
 * id = request id, from the verdicts the batch got: retried, held, cancellable and replayable as
 * any other. The batch's RelayRequestIds search attribute finds it from any of its requests.
 */
import { ParentClosePolicy, proxyLocalActivities, startChild } from "@temporalio/workflow";
import type { DeliveryBatch } from "../core/delivery.ts";
import { DELIVERY_WORKFLOW, fairnessOf, requestSearchAttributeLists } from "../core/temporal.ts";
import type { Activities } from "./activities.ts";
import type { BatchedFirst } from "./deliveries.ts";
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
  // Failed as a whole (the worker's database, say): every request goes on as its own.
  const firsts = await firstAttemptsOfBatch(batch.project, batch.requests).catch(
    (): (BatchedFirst | null)[] => [],
  );
  const outcomes = batch.requests.map((request, i) => ({ request, first: firsts[i] ?? null }));
  await Promise.all(
    outcomes.map(async ({ request, first }) => {
      if (first && "settled" in first) {
        if (first.settled !== "delivered") {
          await raise(requestFailed(request, first.settled, request.requestId));
        }
        return;
      }
      await startChild(DELIVERY_WORKFLOW, {
        workflowId: request.requestId,
        args: [{ ...request, ...(first && { firstAttempts: first.verdicts }) }],
        // It outlives the batch: the batch ends once every request is settled or handed on.
        parentClosePolicy: ParentClosePolicy.ABANDON,
        searchAttributes: requestSearchAttributeLists(request, "delivering"),
        priority: fairnessOf(batch.project),
      });
    }),
  );
  return outcomes.filter(({ first }) => !(first && "settled" in first)).length;
}
