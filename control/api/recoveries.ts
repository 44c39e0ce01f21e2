/**
 * Recovery jobs (core/recoveries.ts): a dry run says what a replay by filter would send and cost;
 * a job does it in the background, a workflow stepping through the control plane's activities
 * (./recovery-steps.ts), and is read and cancelled here. The failure queue's bulk replay is one.
 */
import { z } from "zod";
import { deliveryCredits, isMetered } from "../../core/billing.ts";
import { RelayError } from "../../core/errors.ts";
import { finishedStatuses, type RequestStatus } from "../../core/model.ts";
import {
  RECOVERED_BY_DEFAULT,
  RECOVERIES_KEPT_PER_PROJECT,
  RECOVERIES_RUNNING_PER_PROJECT,
  type RecoveryFilter,
} from "../../core/recoveries.ts";
import { newId } from "../../core/secrets.ts";
import { fairnessOf, JOB_TASK_QUEUE, RECOVERY_WORKFLOW } from "../../core/temporal.ts";
import { exhaustedPools } from "../../store/credits.ts";
import type { RecoveryRow } from "../../store/recoveries.ts";
import * as recoveries from "../../store/recoveries.ts";
import { targetExists } from "../../store/routing.ts";
import { type Ctx, type ProjectAccess, projectAccess } from "./context.ts";
import { cancelReplays } from "./recovery-steps.ts";
import { requestFilter } from "./requests.ts";
import { NO_CONTROL_CHARACTERS, parseInput } from "./validation.ts";

const { receivedFrom, receivedTo, ...byRequest } = requestFilter;

export const recoveryBody = z.strictObject({
  ...byRequest,
  status: z
    .enum(finishedStatuses as [RequestStatus, ...RequestStatus[]])
    .optional()
    .describe("Requests in this status (a finished one); failed and partially failed if left out"),
  target: z
    .string()
    .max(100)
    .regex(new RegExp(NO_CONTROL_CHARACTERS), "must be a target id")
    .optional()
    .describe("Only this target (its id): requests it did not get, replayed to it alone"),
  since: receivedFrom,
  until: receivedTo.describe(
    "Requests received before this time (RFC 3339); at most the job's start, its default",
  ),
  dryRun: z.boolean().default(false).describe("Answer what would be sent and its cost, only"),
});

type RecoveryBody = z.output<typeof recoveryBody>;

/** A dry run's answer: how many requests would replay, and the credits they would hold. */
export interface RecoveryPlan {
  matched: number;
  credits: number;
}

/** A dry run's plan (`dryRun`), or the job started (then read with `getRecovery`). */
export async function startRecovery(
  ctx: Ctx,
  slug: string,
  input: unknown,
): Promise<RecoveryPlan | RecoveryView> {
  const access = await projectAccess(ctx, slug);
  const body = parseInput(recoveryBody, input);
  const filter = await filterOf(
    ctx,
    access,
    body,
    body.status ? [body.status] : RECOVERED_BY_DEFAULT,
  );
  if (!body.dryRun) return startJob(ctx, access, filter);
  const { matched, credits } = await planOf(ctx, access, filter);
  return { matched, credits };
}

/**
 * The failure queue's replay of every failure that matches (the request log's filter): a
 * recovery job of those statuses.
 */
export async function recoverFailures(
  ctx: Ctx,
  slug: string,
  filter: Omit<RecoveryBody, "dryRun" | "status" | "since" | "until" | "target"> & {
    status?: RequestStatus | undefined;
    receivedFrom?: string | undefined;
    receivedTo?: string | undefined;
  },
): Promise<RecoveryView> {
  const access = await projectAccess(ctx, slug);
  const { status, receivedFrom: since, receivedTo: until, ...rest } = filter;
  const statuses = RECOVERED_BY_DEFAULT.filter((s) => !status || s === status);
  return startJob(ctx, access, await filterOf(ctx, access, { ...rest, since, until }, statuses));
}

async function filterOf(
  ctx: Ctx,
  access: ProjectAccess,
  body: Omit<RecoveryBody, "dryRun" | "status">,
  statuses: RequestStatus[],
): Promise<RecoveryFilter> {
  const { endpoint, target, since, until, requestId, idempotencyKey, targetStatus } = body;
  if (target !== undefined && !(await targetExists(ctx.sql, access.projectId, target))) {
    throw new RelayError("not_found", `no target '${target}'`);
  }
  const now = ctx.now();
  const [line, path] = endpoint?.split("/") ?? [];
  return {
    statuses,
    ...(line !== undefined && { endpoint: { line, path: path ?? "" } }),
    ...(target !== undefined && { targetId: target }),
    ...(since !== undefined && { since: new Date(since).toISOString() }),
    // A job replays what failed before it started, not what fails while it runs.
    until: new Date(
      Math.min(until ? Date.parse(until) : now.getTime(), now.getTime()),
    ).toISOString(),
    ...(requestId !== undefined && { requestId }),
    ...(idempotencyKey !== undefined && { idempotencyKey }),
    ...(targetStatus !== undefined && { targetStatus }),
  };
}

async function planOf(ctx: Ctx, access: ProjectAccess, filter: RecoveryFilter) {
  const groups = await recoveries.matchGroups(ctx.sql, access.projectId, filter);
  const metered = groups.filter((g) => isMetered(access.plan, g.keyMode));
  return {
    matched: groups.reduce((sum, g) => sum + g.requests, 0),
    credits: metered.reduce(
      (sum, g) => sum + g.requests * g.targets * deliveryCredits(g.bodyBytes),
      0,
    ),
    /** The metered pools its replays draw on. */
    pools: [...new Set(metered.map((g) => g.keyMode))],
  };
}

async function startJob(
  ctx: Ctx,
  access: ProjectAccess,
  filter: RecoveryFilter,
): Promise<RecoveryView> {
  const { pools, ...plan } = await planOf(ctx, access, filter);
  // A job whose pools are empty would send nothing: refused now rather than failed at once.
  const empty = await exhaustedPools(ctx.sql, access.projectId, access.plan);
  if (pools.length > 0 && pools.every((pool) => empty.includes(pool))) {
    throw new RelayError(
      "insufficient_credits",
      `the project's ${pools.join(" and ")} credits are used up: its replays would send nothing`,
    );
  }
  const recoveryId = newId("rec");
  await ctx.sql.begin(async (tx) => {
    // One job starts at a time per project, so the count holds.
    await tx`select 1 from projects where id = ${access.projectId} for update`;
    const { running, kept } = await recoveries.runningRecoveries(tx, access.projectId);
    if (running >= RECOVERIES_RUNNING_PER_PROJECT) {
      throw new RelayError(
        "limit_exceeded",
        `a project runs at most ${RECOVERIES_RUNNING_PER_PROJECT} recovery jobs at once; wait for one to end or cancel one`,
      );
    }
    if (kept >= RECOVERIES_KEPT_PER_PROJECT) {
      throw new RelayError(
        "limit_exceeded",
        `a project keeps at most ${RECOVERIES_KEPT_PER_PROJECT} recovery jobs; those that ended leave with the request log's retention`,
      );
    }
    await recoveries.createRecovery(tx, {
      recoveryId,
      projectId: access.projectId,
      filter,
      ...plan,
    });
  });
  try {
    const client = await ctx.temporal();
    await client.workflow.start(RECOVERY_WORKFLOW, {
      taskQueue: JOB_TASK_QUEUE,
      workflowId: recoveryId,
      args: [recoveryId],
      priority: fairnessOf(access.slug),
    });
  } catch (error) {
    await ctx.sql`delete from recoveries where id = ${recoveryId}`;
    throw error;
  }
  return getRecovery(ctx, access.slug, recoveryId);
}

/** A job as members read it. */
export type RecoveryView = Omit<RecoveryRow, "projectId" | "exhausted" | "cursor" | "filter"> & {
  filter: RecoveryFilterView;
};

/** A job's filter as it was asked for (`endpoint` as "{line}/{endpoint}", `target` by id). */
export interface RecoveryFilterView {
  statuses: RequestStatus[];
  endpoint?: string;
  target?: string;
  since?: string;
  until?: string;
  requestId?: string;
  idempotencyKey?: string;
  targetStatus?: number;
}

function viewOf({ projectId: _, exhausted: __, cursor: ___, filter, ...job }: RecoveryRow) {
  const { endpoint, targetId, ...rest } = filter;
  const view: RecoveryFilterView = {
    ...rest,
    ...(endpoint && { endpoint: `${endpoint.line}/${endpoint.path}` }),
    ...(targetId !== undefined && { target: targetId }),
  };
  return { ...job, filter: view };
}

export async function getRecovery(ctx: Ctx, slug: string, recoveryId: string) {
  const access = await projectAccess(ctx, slug);
  const job = await recoveries.findRecovery(ctx.sql, recoveryId, access.projectId);
  if (!job) throw new RelayError("not_found", `no recovery job '${recoveryId}'`);
  return viewOf(job);
}

/** The project's jobs, newest first (the last 50). */
export async function listRecoveries(ctx: Ctx, slug: string) {
  const access = await projectAccess(ctx, slug);
  const jobs = await recoveries.listRecoveries(ctx.sql, access.projectId, 50);
  return { recoveries: jobs.map(viewOf) };
}

/**
 * Cancels a running job: it starts no replay from now on, and the replays under way are
 * cancelled (one that delivered meanwhile stays delivered). A job that is not running (cancelled
 * already, completed, failed) answers as it stands.
 */
export async function cancelRecovery(ctx: Ctx, slug: string, recoveryId: string) {
  const access = await projectAccess(ctx, slug);
  if (await recoveries.cancelRecovery(ctx.sql, access.projectId, recoveryId)) {
    // At once rather than at the job's next step; that step cancels any a racing step started.
    await cancelReplays(ctx, await recoveries.runningReplays(ctx.sql, recoveryId));
  }
  return getRecovery(ctx, slug, recoveryId);
}
