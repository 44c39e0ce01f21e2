/**
 * Replay: a new, logged attempt series for a finished request (delivered, partially failed,
 * failed or cancelled), with the request's original input read back from Temporal (its own
 * workflow's history, or the batch's that made its first attempts), so large bodies keep their
 * stored reference. It goes to the targets that did not get the request, or to all of them when
 * every target got it (a delivered request is delivered again), each as it is now. A replay is
 * a delivery like a call: numbered, it holds and is charged its own credits and takes its place
 * under the cap (./member-holds.ts), and one replay of a request runs at a time. The request's
 * status is settled again from all its attempts once the series ends.
 */
import type { Client } from "@temporalio/client";
import { WorkflowExecutionAlreadyStartedError } from "@temporalio/common";
import { deliveryHolds } from "../../core/billing.ts";
import type { DeliveryInput } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { type DeliveryTarget, finishedStatuses, type RequestStatus } from "../../core/model.ts";
import {
  DELIVERY_WORKFLOW,
  fairnessOf,
  requestSearchAttributeLists,
  TASK_QUEUE,
} from "../../core/temporal.ts";
import { storedPayloadValue } from "../../platform/temporal.ts";
import type { Queryable } from "../../store/db.ts";
import { requireWithinCap } from "../../store/limits.ts";
import { beginReplay, type ReplayBegun, undoReplay } from "../../store/request-log.ts";
import { deliveredTargets, findRequest } from "../../store/request-views.ts";
import { loadEndpoints } from "../../store/routing.ts";
import { anyBatchInput } from "./batched.ts";
import { type Ctx, type Deps, type ProjectAccess, projectAccess } from "./context.ts";
import { contentErased } from "./erase.ts";
import { capsOf } from "./limits.ts";
import { reserveMemberDelivery } from "./member-holds.ts";
import { getRequest, type RequestView, requestOf } from "./requests.ts";

export async function replayRequest(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<RequestView> {
  const access = await projectAccess(ctx, slug);
  await startReplay(ctx, access, await requestOf(ctx, access, requestId));
  return getRequest(ctx, slug, requestId);
}

export type ReplayDeps = Pick<Deps, "sql" | "temporal" | "waitingCaps" | "now" | "projectLimits">;

export interface ReplayOptions {
  /** Only this target, when it did not get the request (a recovery job's of one target). */
  onlyTarget?: string;
  /**
   * A recovery job's hold on the request, first in the replay's transaction: false when the job
   * has it already (nothing replays then); told the replay's number once it began, and when its
   * start was made.
   */
  claim?: {
    take(tx: Queryable): Promise<boolean>;
    numbered(tx: Queryable, begun: ReplayBegun): Promise<void>;
    launched(): Promise<void>;
  };
}

/**
 * Starts a replay of a finished request of the project; throws why not (409 unfinished, erased,
 * out of Temporal's retention, its targets gone; the cap's and the credits' refusals). False
 * when a claim found the request taken.
 */
export async function startReplay(
  deps: ReplayDeps,
  project: Pick<ProjectAccess, "projectId" | "slug" | "plan">,
  request: Pick<RequestView, "requestId" | "status" | "contentErasedAt">,
  { onlyTarget, claim }: ReplayOptions = {},
): Promise<boolean> {
  const { requestId } = request;
  if (!finishedStatuses.includes(request.status)) throw notFinished(request);
  const erased = contentErased(request, "replayed");
  if (erased) throw erased;
  const replaying = await replayInput(deps, project.projectId, requestId, onlyTarget);
  const { input, ordering } = replaying;
  const begun = await deps.sql.begin(async (tx) => {
    if (claim && !(await claim.take(tx))) return null;
    const begun = await beginReplay(tx, project.projectId, requestId);
    if (!begun) return undefined;
    // Each replay under way is a workflow: a project has at most its cap of them (409 past it).
    await requireWithinCap(tx, project.projectId, capsOf(deps), "replays");
    const workflowId = replayWorkflowId(requestId, begun.replay);
    await reserveMemberDelivery(deps, tx, project, {
      requestId,
      pool: input.keyMode,
      holds: deliveryHolds(input.targets, input.bodyBytes),
      replay: begun.replay,
      waits: ordering ? null : { workflowId, targets: input.targets },
    });
    await claim?.numbered(tx, begun);
    return begun;
  });
  if (begun === null) return false;
  if (!begun) {
    throw notFinished((await findRequest(deps.sql, project.projectId, requestId)) ?? request);
  }
  try {
    await launchReplay(replaying, begun.replay);
  } catch (error) {
    const workflowId = replayWorkflowId(requestId, begun.replay);
    await undoReplay(deps.sql, requestId, { ...begun, workflowId }, deps.waitingCaps);
    throw error;
  }
  await claim?.launched();
  return true;
}

/**
 * Makes the start of a replay that began (its row, holds and place committed) but whose start
 * was never made: its process died in between. Made already, it is left be.
 */
export async function resumeReplay(
  deps: ReplayDeps,
  projectId: string,
  requestId: string,
  { replay, onlyTarget }: { replay: number; onlyTarget?: string | undefined },
): Promise<void> {
  const replaying = await replayInput(deps, projectId, requestId, onlyTarget);
  await launchReplay(replaying, replay).catch((error: unknown) => {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  });
}

interface Replaying {
  client: Client;
  /** The original input, to the targets the replay goes to now. */
  input: DeliveryInput;
  ordering: DeliveryInput["ordering"];
}

/** What a replay of the request delivers: its original input, to the targets it goes to now. */
async function replayInput(
  deps: ReplayDeps,
  projectId: string,
  requestId: string,
  onlyTarget: string | undefined,
): Promise<Replaying> {
  const client = await deps.temporal();
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
  const delivered = await deliveredTargets(deps.sql, requestId);
  const missed = input.targets.filter(
    (t) => !delivered.includes(t.id) && (onlyTarget === undefined || t.id === onlyTarget),
  );
  const targets = await targetsNow(
    deps,
    projectId,
    input,
    missed.length > 0 || onlyTarget !== undefined ? missed : input.targets,
  );
  return { client, input: { ...input, targets }, ordering };
}

function launchReplay({ client, input, ordering }: Replaying, replay: number): Promise<void> {
  return startDelivery(
    client,
    // A replay joins its lane (at its end) from its own workflow.
    {
      ...input,
      replay,
      ...(ordering && { ordering: { laneId: ordering.laneId, key: ordering.key } }),
    },
    replayWorkflowId(input.requestId, replay),
    "delivering",
  );
}

/** A request's replay number `replay` is delivered by this workflow. */
export const replayWorkflowId = (requestId: string, replay: number) =>
  `${requestId}-replay-${replay}`;

/**
 * The targets a replay goes to, as they are now (by id: a target edited since takes its new URL
 * and headers); 409 naming why when every one of them was deleted since (or made sync or stream).
 */
async function targetsNow(
  deps: Pick<Deps, "sql">,
  projectId: string,
  request: Pick<DeliveryInput, "requestId" | "line" | "endpoint">,
  replayed: DeliveryTarget[],
): Promise<DeliveryTarget[]> {
  const [endpoint] = await loadEndpoints(deps.sql, projectId, {
    line: request.line,
    path: request.endpoint,
  });
  // A target made sync or stream since is not an async delivery's any more.
  const now = new Map(
    endpoint?.targets.filter((t) => t.deliveryMode === "async").map((t) => [t.id, t]),
  );
  const targets = replayed.flatMap((t) => now.get(t.id) ?? []);
  if (targets.length === 0) {
    const names = replayed.map((t) => `'${t.name}'`).join(", ");
    throw new RelayError(
      "conflict",
      `request '${request.requestId}' cannot be replayed: its target${replayed.length > 1 ? "s" : ""} ${names} ${replayed.length > 1 ? "were" : "was"} deleted (or made sync or stream)`,
    );
  }
  return targets;
}

/** A request that is not finished (a replay of it running included) does not replay. */
function notFinished(request: Pick<RequestView, "requestId" | "status">): RelayError {
  return new RelayError(
    "conflict",
    `request '${request.requestId}' is ${request.status}; only a finished request (delivered, partially failed, failed or cancelled) replays, one replay at a time`,
  );
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
