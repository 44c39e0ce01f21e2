/**
 * Cancel: a request not yet delivered (scheduled, or between attempts) gets no further attempts.
 * Its workflow does the stopping (Temporal's cancel: a timer or a backoff ends at once, an attempt
 * in flight is aborted and logged) and marks it cancelled, so the log has one writer; this waits
 * a while for that and answers the request as it then stands.
 */
import {
  type Client,
  type WorkflowExecutionDescription,
  WorkflowNotFoundError,
} from "@temporalio/client";
import { RelayError } from "../../core/errors.ts";
import type { RequestStatus } from "../../core/model.ts";
import { DELIVERY_WORKFLOW, HAND_ON_SIGNAL } from "../../core/temporal.ts";
import { projectKey } from "../../platform/temporal.ts";
import { keptStartOf } from "../../store/accepted-starts.ts";
import * as requestLog from "../../store/request-views.ts";
import { isRequestId, pause, runningBatchOf, VISIBILITY_LOOKS_MS } from "./batched.ts";
import { type Ctx, projectAccess } from "./context.ts";
import type { RequestView } from "./requests.ts";

/** How long a cancel waits for the workflow to stop: past an attempt's heartbeat, with room. */
const STOP_WAIT_MS = 15_000;
/** How often a cancel looks again whether a batched request's first attempt is over. */
const BATCH_POLL_MS = 100;

export async function cancelRequest(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<RequestView> {
  const access = await projectAccess(ctx, slug);
  const logged = () => requestLog.findRequest(ctx.sql, access.projectId, requestId);
  const before = await logged();
  if (before?.status === "cancelled") return before;
  if (before) refuseFinished(before);
  const client = await ctx.temporal();
  const handle = client.workflow.getHandle(requestId);
  // A request the worker has not opened yet is only in Temporal: its project is on the workflow.
  const described = () =>
    handle.describe().catch((error: unknown) => {
      if (error instanceof WorkflowNotFoundError) return null;
      throw error;
    });
  const workflow =
    (await described()) ??
    (await afterBatchedFirstAttempt(client, access.slug, requestId, described, logged));
  const ours =
    workflow?.type === DELIVERY_WORKFLOW &&
    workflow.typedSearchAttributes.get(projectKey) === access.slug;
  if (!ours) {
    if (!before && (await keptStartOf(ctx.sql, access.projectId, requestId))) {
      // Accepted, its start not made yet (its edge's is late, or the sweep's is due): soon.
      throw new RelayError(
        "conflict",
        `request '${requestId}' is not started yet; try again in a few seconds`,
      );
    }
    if (!before) throw new RelayError("not_found", `no request '${requestId}'`);
    throw new RelayError(
      "conflict",
      `request '${requestId}' cannot be cancelled: only async deliveries within Temporal's retention can`,
    );
  }
  const running = workflow.status.name === "RUNNING";
  if (running) {
    await handle.cancel().catch((error: unknown) => {
      if (!(error instanceof WorkflowNotFoundError)) throw error; // it ended meanwhile
    });
    await stopped(client, () => handle.result());
  }
  const after = await logged();
  if (after?.status === "cancelled") return after;
  if (after) refuseFinished(after);
  if (!running || !after) {
    // Ended with nothing to stop: a replay's delivery runs under a workflow of its own.
    throw new RelayError("conflict", `request '${requestId}' has no delivery left to cancel`);
  }
  return after; // still stopping (an attempt that does not heed its abort): cancelled soon
}

/** A request that ended before the cancel took (delivered, failed) stays as it ended. */
function refuseFinished(request: RequestView): void {
  const ended: RequestStatus[] = ["delivered", "partially_failed", "failed"];
  if (request.status === "delivered") {
    throw new RelayError(
      "request_already_delivered",
      `request '${request.requestId}' was already delivered`,
    );
  }
  if (ended.includes(request.status)) {
    throw new RelayError(
      "conflict",
      `request '${request.requestId}' has ${request.status.replace("_", " ")}: it makes no further attempts (replay it instead)`,
    );
  }
}

/**
 * A batched request (edge/batcher.ts) has no workflow of its own while its batch makes its first
 * attempt (or holds it for a limited target's room), and nothing of it can be stopped there. So
 * while a running batch of the project lists it, this asks the batch to hand it on and waits
 * (STOP_WAIT_MS at most) for that: the request then continues as its own workflow, answered here
 * to be cancelled as any, or the log says it ended, answered as today. Null when no batch of the project lists it (by VISIBILITY_LOOKS_MS): not batched.
 */
async function afterBatchedFirstAttempt(
  client: Client,
  slug: string,
  requestId: string,
  described: () => Promise<WorkflowExecutionDescription | null>,
  logged: () => Promise<RequestView | undefined>,
): Promise<WorkflowExecutionDescription | null> {
  if (!isRequestId(requestId)) return null;
  const started = Date.now();
  const looks = [...VISIBILITY_LOOKS_MS];
  let listed = false;
  for (;;) {
    const at = looks[0];
    if (!listed && at !== undefined && Date.now() - started >= at) {
      looks.shift();
      const batch = await runningBatchOf(client, requestId);
      listed = batch?.project === slug;
      if (!listed && looks.length === 0) return null;
      // One it holds for a limited target's room goes on as its own workflow, to be cancelled.
      if (batch && listed) {
        await client.workflow
          .getHandle(batch.workflowId, batch.runId)
          .signal(HAND_ON_SIGNAL, requestId)
          .catch(() => {}); // it ended meanwhile: the log or the request's own workflow says
      }
    }
    if (Date.now() - started >= STOP_WAIT_MS) {
      throw new RelayError(
        "conflict",
        `request '${requestId}' is making its first attempt in a batch and cannot be cancelled during it; try again in a moment`,
      );
    }
    await pause(BATCH_POLL_MS);
    // The log first: a request the batch settled has no workflow of its own, ever.
    const row = await logged();
    if (row) refuseFinished(row);
    const own = await described();
    if (own) return own;
  }
}

/** Waits at most STOP_WAIT_MS for the workflow to end, however it ends. */
async function stopped(client: Client, result: () => Promise<unknown>): Promise<void> {
  await client.withAbortSignal(AbortSignal.timeout(STOP_WAIT_MS), result).catch(() => {});
}
