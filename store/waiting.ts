/**
 * A project's waiting deliveries (core/waiting.ts): the delayed calls edges accepted, until their
 * time (`scheduled_calls`, migration 012), and the deliveries held for a paused or failing target
 * (`held_deliveries`, migration 010), and the ordered requests in their lanes (`lane_waits`,
 * migration 020, counted per project beside them, migration 026), and the places calls to held
 * targets took as they were accepted (`held_places`, migration 029). Whoever adds or removes one
 * takes the project's waiting lock first, so each count is exact, and a held count reaching or
 * leaving the cap goes on the change feed once: the edges then refuse (or take again) the
 * project's async calls.
 */
import type { Plan } from "../core/model.ts";
import { admittedInOrder, HELD_PLACE_MS, roomFor, waitingCap } from "../core/waiting.ts";
import { recordChange } from "./changes.ts";
import type { Queryable, Sql } from "./db.ts";

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

/**
 * The project's deliveries held for their target now, its places taken for calls on their way to
 * be held, and its ordered requests in lanes.
 */
export async function heldCount(q: Queryable, projectId: string): Promise<number> {
  const [row] = await q<{ count: number }[]>`
    select coalesce((select waiting from held_counts where project_id = ${projectId}), 0)::int
    + (select count(*) from held_places where project_id = ${projectId})::int
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
 * repeat of a call (its Idempotency-Key) keeps its place. In the caller's transaction.
 */
export async function admitScheduled(
  tx: Queryable,
  call: { projectId: string; requestId: string; notBefore: Date; now: Date; cap: number },
): Promise<boolean> {
  const [admitted] = await admitScheduledCalls(tx, { ...call, calls: [call] });
  return admitted ?? false;
}

/**
 * `admitScheduled` for several delayed calls of one project (a batch's), in order: the project's
 * waiting count read once (counted beside the calls, migration 043, so the cost does not grow
 * with them), the admitted ones written in one statement. Calls past their time leave the count
 * here (and in the retention's sweep).
 */
export async function admitScheduledCalls(
  tx: Queryable,
  batch: {
    projectId: string;
    now: Date;
    cap: number;
    calls: readonly { requestId: string; notBefore: Date }[];
  },
): Promise<boolean[]> {
  const { projectId, cap, calls } = batch;
  const waiting = await waitingCount(tx, projectId, batch.now);
  const repeats = await tx<{ requestId: string }[]>`
    select request_id from scheduled_calls
    where request_id = any(${calls.map((call) => call.requestId)}::text[])
      and project_id = ${projectId}`;
  const again = new Set(repeats.map((row) => row.requestId));
  // A call named twice in the batch takes one place, as one after the other would.
  const repeated = calls.map(
    (call, i) =>
      again.has(call.requestId) || calls.findIndex((c) => c.requestId === call.requestId) < i,
  );
  const admitted = admittedInOrder(waiting, cap, repeated);
  const placed = calls.filter((_, i) => admitted[i] && !repeated[i]);
  if (placed.length > 0) {
    await tx`
      insert into scheduled_calls (request_id, project_id, not_before)
      select r, ${projectId}, n
      from unnest(${placed.map((c) => c.requestId)}::text[],
        ${placed.map((c) => c.notBefore.toISOString())}::timestamptz[]) as t(r, n)`;
  }
  return admitted;
}

/**
 * The project's waiting deliveries, under its waiting lock (taken here, held to the caller's
 * commit): its delayed calls not yet due (those past their time leave first) and `heldCount`.
 */
async function waitingCount(tx: Queryable, projectId: string, now: Date): Promise<number> {
  await lockWaiting(tx, projectId);
  return (await scheduledCount(tx, projectId, now)) + (await heldCount(tx, projectId));
}

/** Scheduled calls of the project not yet due (those due leave now), in the caller's transaction. */
async function scheduledCount(tx: Queryable, projectId: string, now: Date): Promise<number> {
  await tx`delete from scheduled_calls where project_id = ${projectId} and not_before <= ${now}`;
  const [row] = await tx<{ waiting: number }[]>`
    select waiting::int from scheduled_counts where project_id = ${projectId}`;
  return row?.waiting ?? 0;
}

/**
 * Takes a place among the project's waiting deliveries for each of an immediate call's targets
 * that hold their deliveries now (core/waiting.ts `heldPlaces`), when there is room for all of
 * them: false when there is not. The worker turns each into the held delivery (store/held.ts);
 * until then it counts as one, so a burst from every edge at once stops at the cap. In the
 * caller's transaction.
 */
export async function admitHeld(
  tx: Queryable,
  call: { projectId: string; requestId: string; targetIds: string[]; now: Date; cap: number },
  caps: PlanCaps,
): Promise<boolean> {
  let admitted = false;
  await changeHeld(tx, { projectId: call.projectId }, caps, async (q) => {
    const waiting =
      (await scheduledCount(q, call.projectId, call.now)) + (await heldCount(q, call.projectId));
    admitted = roomFor(waiting, call.cap, call.targetIds.length);
    if (!admitted) return 0;
    const expiresAt = new Date(call.now.getTime() + HELD_PLACE_MS);
    const taken = await q`
      insert into held_places (request_id, target_id, project_id, expires_at)
      select ${call.requestId}, t.id, ${call.projectId}, ${expiresAt}
      from targets t join endpoints e on e.id = t.endpoint_id
      where t.id = any(${call.targetIds}::text[]) and e.project_id = ${call.projectId}
      on conflict do nothing`;
    return taken.count;
  });
  return admitted;
}

/**
 * The places a request's call took, given back: for these targets (their start failed), or all
 * of them (the request was cancelled).
 */
export async function releasePlaces(
  tx: Queryable,
  requestId: string,
  caps: PlanCaps,
  targetIds?: string[],
): Promise<void> {
  const [place] = await tx<{ projectId: string }[]>`
    select project_id from held_places where request_id = ${requestId} limit 1`;
  if (!place) return;
  await changeHeld(tx, place, caps, async (q) => {
    const gone = await q`
      delete from held_places where request_id = ${requestId}
      ${targetIds ? q`and target_id = any(${targetIds}::text[])` : q``}`;
    return -gone.count;
  });
}

/**
 * Places no worker turned into a held delivery in HELD_PLACE_MS (a start lost between edge and
 * Temporal), given back a project at a time, so the edges learn when its count leaves the cap.
 * Answers how many.
 */
export async function lapsePlaces(sql: Sql, now: Date, caps: PlanCaps): Promise<number> {
  const projects = await sql<{ projectId: string }[]>`
    select distinct project_id from held_places where expires_at <= ${now}`;
  let lapsed = 0;
  for (const project of projects) {
    await sql.begin((tx) =>
      changeHeld(tx, project, caps, async (q) => {
        const gone = await q`
          delete from held_places
          where project_id = ${project.projectId} and expires_at <= ${now}`;
        lapsed += gone.count;
        return -gone.count;
      }),
    );
  }
  return lapsed;
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
  await releasePlaces(tx, requestId, caps);
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
  // A deleted target's held deliveries still name their project (migration 044).
  const [project] =
    "projectId" in of
      ? [{ id: of.projectId }]
      : "targetId" in of
        ? await tx<{ id: string | null }[]>`
          select coalesce(
            (select e.project_id from targets t join endpoints e on e.id = t.endpoint_id
              where t.id = ${of.targetId}),
            (select project_id from held_deliveries
              where target_id = ${of.targetId} and project_id is not null limit 1)) as id`
        : await tx<{ id: string }[]>`
          select project_id as id from held_deliveries
          where request_id = ${of.requestId} and project_id is not null limit 1`;
  if (!project?.id) {
    await change(tx); // nothing of it is counted anywhere
    return;
  }
  await lockWaiting(tx, project.id);
  const changed = await change(tx);
  if (changed === 0) return;
  const after = await heldCount(tx, project.id);
  const cap = await capOf(tx, project.id, caps);
  if (after >= cap !== after - changed >= cap) await recordChange(tx, project.id, "routing");
}
