/**
 * Workflow starts of accepted calls, kept until their edge confirms it made them (migration 021).
 * An edge answers an immediate async call 202 once its reservation and its start commit here,
 * and makes the start after; the start is what makes the acceptance durable while Temporal has
 * no workflow yet. A start no edge confirmed by its due time is claimed by a control plane's
 * sweep (control/accepted-sweep.ts), made, and forgotten.
 */
import { type Reservation, reservationSteps, reservedOf } from "./credits.ts";
import type { Queryable, Sql } from "./db.ts";

/** How long an edge has to confirm its start before a sweep makes it. */
export const START_GRACE_SECONDS = 5;
/**
 * How long a sweep's claim keeps other sweeps off a start it is making (its call to Temporal
 * gives up sooner), and so when a start that failed is tried again.
 */
const CLAIM_SECONDS = 5;

export interface AcceptedStart {
  workflowId: string;
  /** Temporal's HTTP API start request (JSON). */
  start: Uint8Array;
}

/**
 * How long after it was kept a start may be joined: 2 s before a sweep may make it. An edge waits
 * a second at most for an acceptance's answer (edge/batcher.ts), so a join it was told of
 * committed before a sweep could claim the start; a join it gave up on may commit later, and the
 * edge leaves the start to the sweep. Timed from `accepted_at`, not `due_at`, which a sweep's
 * claim moves on (a start joined while a sweep makes it as it read it would be forgotten with the
 * joining calls), and by the clock, not by the transaction's start, which a long acceptance
 * leaves behind.
 */
const JOINABLE_SECONDS = START_GRACE_SECONDS - 2;

/**
 * Keeps a start of `requestIds` in the accepting transaction; false when the project is unknown.
 * `joins`: the calls join the kept start of that workflow id instead, which `start` replaces, id
 * and all (a lone call's own start becomes a batch's); false when it is no longer kept or is
 * near its due time.
 */
export async function keepStart(
  q: Queryable,
  project: string,
  requestIds: readonly string[],
  start: AcceptedStart,
  joins?: string,
): Promise<boolean> {
  const kept = await (joins !== undefined
    ? q`
      update accepted_starts s
      set workflow_id = ${start.workflowId}, start = ${start.start},
        request_ids = s.request_ids || ${requestIds}::text[]
      from projects p
      where s.workflow_id = ${joins} and p.slug = ${project} and s.project_id = p.id
        and s.accepted_at > clock_timestamp() - make_interval(secs => ${JOINABLE_SECONDS})`
    : q`${keeping(q, project, requestIds, start)}`);
  return kept.count > 0;
}

/** The insert of `keepStart`, kept only where `also` holds too. */
function keeping(
  q: Queryable,
  project: string,
  requestIds: readonly string[],
  { workflowId, start }: AcceptedStart,
  also = q`true`,
) {
  return q`
    insert into accepted_starts (workflow_id, project_id, request_ids, start, due_at)
    select ${workflowId}, p.id, ${requestIds}::text[], ${start},
      now() + make_interval(secs => ${START_GRACE_SECONDS})
    from projects p where p.slug = ${project} and ${also}
    on conflict (workflow_id) do nothing`;
}

/**
 * A lone call's acceptance as one statement, so one round trip and one commit: the edge's
 * confirmations forgotten (`forgetStarts`), the call's credits reserved (`reserveCredits`), and
 * its start kept (`keepStart`) only when they were. Most calls of a quiet project come alone,
 * and this is the 202's wait.
 */
export async function acceptLoneCall(
  sql: Sql,
  call: Reservation,
  start: AcceptedStart,
  started: readonly string[],
): Promise<{ reserved: boolean; kept: boolean }> {
  const [row] = await sql<{ reserved: boolean; kept: boolean }[]>`
    with ${reservationSteps(sql, call)}, confirmed as (
      delete from accepted_starts where workflow_id = any(${started}::text[])
    ), kept as (
      ${keeping(sql, call.project, [call.requestId], start, reservedOf(sql))}
      returning 1
    )
    select ${reservedOf(sql)} as reserved, exists (select 1 from kept) as kept`;
  return { reserved: row?.reserved ?? false, kept: row?.kept ?? false };
}

/**
 * The kept start that delivers `requestId`, while it is kept: a request accepted and not started
 * yet. The table holds only starts in flight or left to the sweep, so a scan of a project's rows
 * is short.
 */
export async function keptStartOf(
  q: Queryable,
  projectId: string,
  requestId: string,
): Promise<Uint8Array | undefined> {
  const [row] = await q<{ start: Uint8Array }[]>`
    select start from accepted_starts
    where project_id = ${projectId} and ${requestId} = any(request_ids) limit 1`;
  return row?.start;
}

/** Forgets starts that were made (an edge's confirmations, a sweep's own). */
export async function forgetStarts(q: Queryable, workflowIds: readonly string[]): Promise<void> {
  if (workflowIds.length === 0) return;
  await q`delete from accepted_starts where workflow_id = any(${workflowIds}::text[])`;
}

/**
 * Starts past their due time, claimed for this sweep, the projects' in turn: each project's
 * oldest first, then each one's second, so one project's backlog (a long outage of Temporal)
 * does not hold back another's first start. Each is due again only after the claim, so sweeps of
 * several control planes make each once: a sweep that waited on another's claim finds the row no
 * longer due (and Temporal deduplicates a start anyway).
 */
export async function claimDueStarts(q: Queryable, limit: number): Promise<AcceptedStart[]> {
  return q<AcceptedStart[]>`
    update accepted_starts s set due_at = now() + make_interval(secs => ${CLAIM_SECONDS})
    from (
      select workflow_id from (
        select workflow_id, due_at,
          row_number() over (partition by project_id order by due_at, workflow_id) as turn
        from accepted_starts where due_at <= now()
      ) ranked order by turn, due_at limit ${limit}
    ) due
    where s.workflow_id = due.workflow_id and s.due_at <= now()
    returning s.workflow_id, s.start`;
}
