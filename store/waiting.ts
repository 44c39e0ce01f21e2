/**
 * A project's waiting deliveries (core/waiting.ts): the delayed calls edges accepted, until their
 * time (`scheduled_calls`, migration 012), and the deliveries held for a paused or failing target
 * (`held_deliveries`, migration 010), and the ordered requests in their lanes (`lane_waits`,
 * migration 020, counted per project beside them, migration 026). Whoever adds or removes one
 * takes the project's waiting lock first, so each count is exact, and a held count reaching or
 * leaving the cap goes on the change feed once: the edges then refuse (or take again) the
 * project's async calls.
 */
import type { Plan } from "../core/model.ts";
import { roomForOneMore, waitingCap } from "../core/waiting.ts";
import { recordChange } from "./changes.ts";
import type { Queryable } from "./db.ts";

/** The advisory lock's first key (any constant); the project's hash is the second. */
const WAITING_LOCK = 7_243_003;

export type PlanCaps = Record<Plan, number>;

/** Orders the changes to one project's waiting deliveries, until the caller's commit. */
async function lockWaiting(tx: Queryable, projectId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(${WAITING_LOCK}, hashtext(${projectId}))`;
}

/** A project's cap on waiting deliveries. */
export async function capOf(q: Queryable, projectId: string, caps: PlanCaps): Promise<number> {
  const [row] = await q<{ plan: Plan; maxWaitingDeliveries: number | null }[]>`
    select plan, max_waiting_deliveries from projects where id = ${projectId}`;
  return row ? waitingCap(row.plan, caps, row.maxWaitingDeliveries) : 0;
}

/** The project's deliveries held for their target now, and its ordered requests in lanes. */
export async function heldCount(q: Queryable, projectId: string): Promise<number> {
  const [row] = await q<{ count: number }[]>`
    select (select count(*)
      from held_deliveries h join targets t on t.id = h.target_id
        join endpoints e on e.id = t.endpoint_id
      where e.project_id = ${projectId})::int
    + coalesce((select waiting from lane_wait_counts where project_id = ${projectId}), 0)::int
      as count`;
  return row?.count ?? 0;
}

/**
 * An ordered request enters its lane (`waiting`) or leaves it (its end), counted among its
 * project's waiting deliveries.
 */
export async function laneWait(
  tx: Queryable,
  wait: { requestId: string; project: string; laneId: string },
  waiting: boolean,
  caps: PlanCaps,
): Promise<void> {
  await laneWaits(tx, wait.project, [wait], waiting, caps);
}

/** Ordered requests of a project (a batch's) enter their lanes or leave them, in one change. */
export async function laneWaits(
  tx: Queryable,
  projectSlug: string,
  waits: { requestId: string; laneId: string }[],
  waiting: boolean,
  caps: PlanCaps,
): Promise<void> {
  if (waits.length === 0) return;
  const [project] = await tx<{ id: string }[]>`select id from projects where slug = ${projectSlug}`;
  if (!project) return;
  const requestIds = waits.map((w) => w.requestId);
  await changeHeld(tx, { projectId: project.id }, caps, async (q) =>
    waiting
      ? (
          await q`
            insert into lane_waits (request_id, project_id, lane_id)
            select r, ${project.id}, l
            from unnest(${requestIds}::text[], ${waits.map((w) => w.laneId)}::text[]) as t(r, l)
            on conflict do nothing`
        ).count
      : -(await q`delete from lane_waits where request_id = any(${requestIds}::text[])`).count,
  );
}

/**
 * Takes a place among the project's waiting deliveries for a delayed call, when one is left
 * (scheduled calls not yet due and held deliveries, against the cap): false when none is. A
 * repeat of a call (its Idempotency-Key) keeps its place. Calls past their time leave the count
 * here (and in the retention's sweep). In the caller's transaction.
 */
export async function admitScheduled(
  tx: Queryable,
  call: { projectId: string; requestId: string; notBefore: Date; now: Date; cap: number },
): Promise<boolean> {
  await lockWaiting(tx, call.projectId);
  await tx`
    delete from scheduled_calls where project_id = ${call.projectId} and not_before <= ${call.now}`;
  const [row] = await tx<{ scheduled: number; again: boolean }[]>`
    select count(*)::int as scheduled, bool_or(request_id = ${call.requestId}) as again
    from scheduled_calls where project_id = ${call.projectId}`;
  if (row?.again) return true;
  const waiting = (row?.scheduled ?? 0) + (await heldCount(tx, call.projectId));
  if (!roomForOneMore(waiting, call.cap)) return false;
  await tx`
    insert into scheduled_calls (request_id, project_id, not_before)
    values (${call.requestId}, ${call.projectId}, ${call.notBefore})`;
  return true;
}

/** A delayed call that will not wait after all (its start failed, it was cancelled). */
export async function forgetScheduled(q: Queryable, requestId: string): Promise<void> {
  await q`delete from scheduled_calls where request_id = ${requestId}`;
}

/** A cancelled request waits no more: neither for its time, nor for any target, nor in a lane. */
export async function forgetWaiting(tx: Queryable, requestId: string, caps: PlanCaps) {
  await forgetScheduled(tx, requestId);
  await changeHeld(tx, { requestId }, caps, (q) =>
    q`delete from held_deliveries where request_id = ${requestId}`.then((r) => -r.count),
  );
  const [inLane] = await tx<{ projectId: string }[]>`
    select project_id from lane_waits where request_id = ${requestId}`;
  if (inLane) {
    await changeHeld(tx, inLane, caps, (q) =>
      q`delete from lane_waits where request_id = ${requestId}`.then((r) => -r.count),
    );
  }
}

/**
 * Adds or removes held deliveries of one project (`change` answers by how many: +n, -n), under
 * its waiting lock; when the count reached or left the cap, tells the edges. The project is the
 * target's, the held request's, or named.
 */
export async function changeHeld(
  tx: Queryable,
  of: { targetId: string } | { requestId: string } | { projectId: string },
  caps: PlanCaps,
  change: (tx: Queryable) => Promise<number>,
): Promise<void> {
  const [project] =
    "projectId" in of
      ? [{ id: of.projectId }]
      : "targetId" in of
        ? await tx<{ id: string }[]>`
          select e.project_id as id from targets t join endpoints e on e.id = t.endpoint_id
          where t.id = ${of.targetId}`
        : await tx<{ id: string }[]>`
          select e.project_id as id from held_deliveries h join targets t on t.id = h.target_id
            join endpoints e on e.id = t.endpoint_id
          where h.request_id = ${of.requestId} limit 1`;
  if (!project) {
    await change(tx); // its target is gone: counted nowhere
    return;
  }
  await lockWaiting(tx, project.id);
  const changed = await change(tx);
  if (changed === 0) return;
  const after = await heldCount(tx, project.id);
  const cap = await capOf(tx, project.id, caps);
  if (after >= cap !== after - changed >= cap) await recordChange(tx, project.id, "routing");
}
