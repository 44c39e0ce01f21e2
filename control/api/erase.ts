/**
 * What a project keeps of its requests, and erasing it: a member erases one finished request's
 * headers, body and answers from the log at once (a data subject's request, a secret sent by
 * mistake); an owner sets how many days the project keeps them at all, within its plan, after
 * which the daily run erases them (store/content-erase.ts). Temporal's copy of a request (sealed
 * by the payload codec) ages out with the namespace's retention (docs/api.md). An owner may also
 * delete the whole project, its Temporal histories deleted with it.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { finishedStatuses, type Plan } from "../../core/model.ts";
import { deleteProjectHistories } from "../../platform/temporal.ts";
import { waitForEdgesToCatchUp } from "../../store/changes.ts";
import * as erase from "../../store/content-erase.ts";
import { deleteProjectRows, retireProject } from "../../store/project-erase.ts";
import { listScheduleIds } from "../../store/schedules.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { getRequest, type RequestView, requestOf } from "./requests.ts";
import { forgetSchedule } from "./schedules.ts";
import { parseInput } from "./validation.ts";

/** The most days a project of each plan may keep its requests' content. */
const maxRetentionDays: Record<Plan, number> = { free: 30, paid: 365 };
/** What any plan allows: the document's bound. */
const MOST_DAYS = Math.max(...Object.values(maxRetentionDays));

export async function eraseRequestContent(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<RequestView> {
  const access = await projectAccess(ctx, slug);
  const request = await requestOf(ctx, access, requestId);
  const erased =
    finishedStatuses.includes(request.status) &&
    (await erase.eraseRequestContent(ctx.sql, access.projectId, requestId, ctx.now()));
  if (!erased) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' is ${request.status}: its deliveries still need its content; cancel it, or erase it once it is finished`,
    );
  }
  return getRequest(ctx, slug, requestId);
}

/** A conflict for an operation that needs a request's content, once it was erased. */
export function contentErased(
  request: Pick<RequestView, "requestId" | "contentErasedAt">,
  operation: string,
): RelayError | undefined {
  if (!request.contentErasedAt) return undefined;
  return new RelayError(
    "conflict",
    `request '${request.requestId}' cannot be ${operation}: its content was erased at ${request.contentErasedAt.toISOString()}`,
  );
}

export const retentionBody = z.strictObject({
  retentionDays: z
    .number()
    .int()
    .min(1)
    // A project's own plan may allow less (checked on saving).
    .max(MOST_DAYS, `a project keeps content at most ${MOST_DAYS} days`)
    .nullable()
    .describe(
      "Days the project's request headers, bodies and answers are kept (at most 30 on the free plan, 365 on the paid); null: as long as the log keeps the request",
    ),
});

export interface RetentionView {
  retentionDays: number | null;
  /** The most the project's plan allows. */
  maxRetentionDays: number;
}

export async function getRetention(ctx: Ctx, slug: string): Promise<RetentionView> {
  const access = await projectAccess(ctx, slug);
  return {
    retentionDays: await erase.contentRetentionDays(ctx.sql, access.projectId),
    maxRetentionDays: maxRetentionDays[access.plan],
  };
}

export async function setRetention(ctx: Ctx, slug: string, input: unknown): Promise<RetentionView> {
  const access = await projectAccess(ctx, slug, "owner");
  const most = maxRetentionDays[access.plan];
  const { retentionDays } = parseInput(
    // Past what any plan allows is the schema's refusal alone.
    retentionBody.refine(({ retentionDays: d }) => d === null || d <= most || d > MOST_DAYS, {
      path: ["retentionDays"],
      message: `a ${access.plan} project keeps content at most ${most} days`,
    }),
    input,
  );
  await erase.setContentRetentionDays(ctx.sql, access.projectId, retentionDays);
  return { retentionDays, maxRetentionDays: most };
}

/**
 * Deletes a project and everything it has (owners and the admin): its keys are revoked and every
 * edge refuses them first, then its Temporal histories are deleted (a batch operation of
 * Temporal's, by the project's search attribute: it goes on in the background), its schedules'
 * Temporal Schedules with them, and last its rows. Its slug stays taken. A Temporal that cannot
 * take the deletion is 503 before any row goes: the DELETE may be sent again.
 */
export async function deleteProject(ctx: Ctx, slug: string): Promise<void> {
  const access = await projectAccess(ctx, slug, "owner");
  await retireProject(ctx.sql, access.projectId, ctx.now());
  await waitForEdgesToCatchUp(ctx.sql);
  const client = await ctx.temporal();
  await deleteProjectHistories(client, access.slug, String(ctx.now().getTime())).catch(
    (cause: unknown) => {
      throw new RelayError(
        "unavailable",
        `Temporal cannot take the deletion of the project's histories now (${String(cause)}); its keys are revoked, nothing else is deleted: send the DELETE again`,
      );
    },
  );
  const scheduled = await listScheduleIds(ctx.sql, access.projectId);
  await Promise.all(scheduled.map((id) => forgetSchedule(client, id)));
  await deleteProjectRows(ctx.sql, access, ctx.now());
  await waitForEdgesToCatchUp(ctx.sql);
}
