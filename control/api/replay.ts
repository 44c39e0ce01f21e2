/**
 * Replay: a new, logged attempt series for a finished request (delivered, partially failed,
 * failed or cancelled), with the request's original input read back from Temporal (its own
 * workflow's history, or the batch's that made its first attempts), so large bodies keep their
 * stored reference. It goes to the targets that did not get the request, or to all of them when
 * every target got it (a delivered request is delivered again). The request's status is settled
 * again from all its attempts once the series ends.
 */
import type { Client } from "@temporalio/client";
import type { DeliveryInput } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { finishedStatuses, type RequestStatus } from "../../core/model.ts";
import {
  DELIVERY_WORKFLOW,
  fairnessOf,
  requestSearchAttributeLists,
  TASK_QUEUE,
} from "../../core/temporal.ts";
import { storedPayloadValue } from "../../platform/temporal.ts";
import { markDelivering } from "../../store/request-log.ts";
import { deliveredTargets } from "../../store/request-views.ts";
import { anyBatchInput } from "./batched.ts";
import type { Ctx } from "./context.ts";
import { getRequest, type RequestView } from "./requests.ts";

export async function replayRequest(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<RequestView> {
  const request = await getRequest(ctx, slug, requestId);
  if (!finishedStatuses.includes(request.status)) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' is ${request.status}; only a finished request (delivered, partially failed, failed or cancelled) replays`,
    );
  }
  const client = await ctx.temporal();
  const original = await originalInput(client, requestId);
  if (!original) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' cannot be replayed: only queued deliveries within Temporal's retention replay`,
    );
  }
  // A replay delivers now, whatever time the original waited for, and makes its own first
  // attempts (a request that went on from its batch has the batch's in its input).
  const { notBefore: _, firstAttempts: __, ordering, ...input } = original;
  const delivered = await deliveredTargets(ctx.sql, requestId);
  const missed = input.targets.filter((t) => !delivered.includes(t.id));
  const targets = missed.length > 0 ? missed : input.targets;
  if (targets.length === 0) {
    throw new RelayError("conflict", `request '${requestId}' has no queued delivery to replay`);
  }
  await markDelivering(ctx.sql, requestId);
  await startDelivery(
    client,
    // A replay joins its lane (at its end) from its own workflow.
    {
      ...input,
      targets,
      ...(ordering && { ordering: { laneId: ordering.laneId, key: ordering.key } }),
    },
    `${requestId}-replay-${Date.now()}`,
    "delivering",
  );
  return getRequest(ctx, slug, requestId);
}

/** Starts a delivery workflow for `input`, as the edge starts one for a call it queues. */
export async function startDelivery(
  client: Client,
  input: DeliveryInput,
  workflowId: string,
  status: RequestStatus,
): Promise<void> {
  await client.workflow.start(DELIVERY_WORKFLOW, {
    taskQueue: TASK_QUEUE,
    priority: fairnessOf(input.project),
    workflowId,
    args: [input],
    searchAttributes: requestSearchAttributeLists(input, status),
  });
}

/**
 * The input a request's delivery started with: its own workflow's first event, or, for one its
 * batch delivered at the first attempt (no workflow of its own), the batch's.
 */
async function originalInput(
  client: Client,
  requestId: string,
): Promise<(DeliveryInput & { firstAttempts?: unknown }) | undefined> {
  const history = await client.workflow
    .getHandle(requestId)
    .fetchHistory()
    .catch(() => null);
  const started = history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (!history) return anyBatchInput(client, requestId);
  if (started?.workflowType?.name !== DELIVERY_WORKFLOW || !payload) return undefined;
  return storedPayloadValue<DeliveryInput>(client, payload);
}
