/**
 * The failure queue and replay. A replay is a new, logged attempt series for the targets that
 * failed, with the request's original input (read back from its workflow's history, so large
 * bodies keep their stored reference); the request's status is settled again from all its
 * attempts once the series ends.
 */
import { z } from "zod";
import type { DeliveryInput } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import {
  DELIVERY_WORKFLOW,
  fairnessOf,
  requestSearchAttributeLists,
  TASK_QUEUE,
} from "../../core/temporal.ts";
import { storedPayloadValue } from "../../platform/temporal.ts";
import { failedTargets, markDelivering } from "../../store/request-log.ts";
import { type Ctx, projectAccess } from "./context.ts";
import {
  failureStatuses,
  getRequest,
  listRequests,
  type RequestView,
  requestFilter,
} from "./requests.ts";
import { parseInput } from "./validation.ts";

export const replayFailuresBody = z.strictObject(requestFilter);

/** Bulk replays walk the queue in pages of this size, at most this many pages. */
const BULK_PAGE = 200;
const BULK_PAGES = 50;

export function listFailures(ctx: Ctx, slug: string, query: unknown) {
  return listRequests(ctx, slug, query, failureStatuses);
}

export async function replayRequest(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<RequestView> {
  const request = await getRequest(ctx, slug, requestId);
  if (!failureStatuses.includes(request.status)) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' is ${request.status}; only failures replay`,
    );
  }
  const client = await ctx.temporal();
  const history = await client.workflow
    .getHandle(requestId)
    .fetchHistory()
    .catch(() => null);
  const started = history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (started?.workflowType?.name !== DELIVERY_WORKFLOW || !payload) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' cannot be replayed: only queued deliveries within Temporal's retention replay`,
    );
  }
  // A replay delivers now, whatever time the original waited for.
  const { notBefore: _, ...original } = await storedPayloadValue<DeliveryInput>(client, payload);
  const failed = await failedTargets(ctx.sql, requestId);
  const targets = original.targets.filter((t) => failed.includes(t.id));
  if (targets.length === 0) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' has no failed queued delivery to replay`,
    );
  }
  await markDelivering(ctx.sql, requestId);
  await client.workflow.start(DELIVERY_WORKFLOW, {
    taskQueue: TASK_QUEUE,
    priority: fairnessOf(original.project),
    workflowId: `${requestId}-replay-${Date.now()}`,
    args: [{ ...original, targets }],
    searchAttributes: requestSearchAttributeLists(original, "delivering"),
  });
  return getRequest(ctx, slug, requestId);
}

/** Replays every failure matching the filter; answers how many it started. */
export async function replayFailures(
  ctx: Ctx,
  slug: string,
  input: unknown,
): Promise<{ replayed: number }> {
  await projectAccess(ctx, slug);
  const filter = parseInput(replayFailuresBody, input);
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < BULK_PAGES; page++) {
    const { requests, nextCursor } = await listFailures(ctx, slug, {
      ...filter,
      cursor,
      limit: BULK_PAGE,
    });
    ids.push(...requests.map((r) => r.requestId));
    if (!nextCursor) break;
    cursor = nextCursor;
  }
  let replayed = 0;
  for (const id of ids) {
    // A request with nothing replayable (a sync call, past retention) is skipped, not fatal.
    const started = await replayRequest(ctx, slug, id).then(
      () => true,
      (error: unknown) => {
        if (error instanceof RelayError && error.code === "conflict") return false;
        throw error;
      },
    );
    if (started) replayed++;
  }
  return { replayed };
}
