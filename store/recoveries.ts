/**
 * Recovery jobs (core/recoveries.ts) as Postgres keeps them: the job with its place among its
 * matches and its counts, and each request it replayed with how that replay ended.
 */
import { finishedStatuses, type KeyMode, type RequestStatus } from "../core/model.ts";
import type { RecoveryFilter, RecoveryState } from "../core/recoveries.ts";
import type { Queryable, Sql } from "./db.ts";
import { delivered, type ReplayBegun } from "./request-log.ts";
import { requestConditions } from "./request-views.ts";

export interface RecoveryView {
  recoveryId: string;
  state: RecoveryState;
  filter: RecoveryFilter;
  /** Why a failed job stopped; null otherwise. */
  error: string | null;
  /** Requests that matched when it started; `sent`, `failed` and `skipped` count up to it. */
  matched: number;
  /** What its replays were to cost, as the dry run answered. */
  credits: number;
  /** Replays that delivered, and that ended otherwise. */
  sent: number;
  failed: number;
  /** Matches that did not replay (unfinished by then, erased, their targets gone). */
  skipped: number;
  /** Replays under way. */
  running: number;
  createdAt: Date;
  updatedAt: Date;
  /** When its last replay ended after it completed, failed or was cancelled. */
  finishedAt: Date | null;
}

export interface RecoveryRow extends RecoveryView {
  projectId: string;
  exhausted: boolean;
  cursor: [Date, string] | null;
}

/** The requests (unaliased) of the project `filter` matches, the time range taken as given. */
function matching(sql: Queryable, projectId: string, filter: RecoveryFilter) {
  const { targetId, since, until, ...exactly } = filter;
  const forTarget = (q: Queryable) => q`
    attempts a where a.request_id = requests.id and a.target_id = ${targetId ?? ""}`;
  return sql`
    project_id = ${projectId}
    ${requestConditions(sql, {
      ...exactly,
      receivedFrom: since === undefined ? undefined : new Date(since),
      receivedTo: until === undefined ? undefined : new Date(until),
    })}
    ${
      targetId === undefined
        ? sql``
        : sql`and exists (select 1 from ${forTarget(sql)})
          and not exists (select 1 from ${forTarget(sql)} and ${delivered(sql)})`
    }`;
}

export interface MatchGroup {
  bodyBytes: number;
  keyMode: KeyMode;
  /** The targets each of these requests' replay goes to. */
  targets: number;
  requests: number;
}

/**
 * What `filter` matches, grouped by what its replays cost: a replay goes to the targets that did
 * not get the request, or to all of them when every target got it (one, for a job of one target).
 */
export function matchGroups(
  sql: Sql,
  projectId: string,
  filter: RecoveryFilter,
): Promise<MatchGroup[]> {
  return sql<MatchGroup[]>`
    select body_bytes, key_mode, t.targets, count(*)::int as requests
    from requests cross join lateral (
      select case
        when ${filter.targetId !== undefined} then 1
        when count(distinct target_id) filter (where not ${delivered(sql)}) > 0
          then count(distinct target_id) filter (where not ${delivered(sql)})
        else greatest(1, count(distinct target_id)) end::int as targets
      from attempts where request_id = requests.id) t
    where ${matching(sql, projectId, filter)}
    group by 1, 2, 3`;
}

export interface Match {
  requestId: string;
  receivedAt: Date;
  status: RequestStatus;
  contentErasedAt: Date | null;
}

/** The next `limit` matches after the job's place, oldest first. */
export async function nextMatches(
  sql: Sql,
  job: Pick<RecoveryRow, "projectId" | "filter" | "cursor">,
  limit: number,
): Promise<Match[]> {
  const [at, id] = job.cursor ?? [null, ""];
  return sql<Match[]>`
    select id as request_id, received_at, status, content_erased_at from requests
    where ${matching(sql, job.projectId, job.filter)}
      ${at === null ? sql`` : sql`and (received_at, id) > (${at}, ${id})`}
    order by received_at, id
    limit ${limit}`;
}

export async function createRecovery(
  sql: Queryable,
  job: { recoveryId: string; projectId: string; filter: RecoveryFilter } & Pick<
    RecoveryView,
    "matched" | "credits"
  >,
): Promise<void> {
  await sql`
    insert into recoveries (id, project_id, filter, state, matched, credits)
    values (${job.recoveryId}, ${job.projectId}, ${sql.json(job.filter as never)}, 'running',
      ${job.matched}, ${job.credits})`;
}

/**
 * The project's jobs still running (cancelled or failed ones whose replays run do not count), and
 * all it keeps.
 */
export async function runningRecoveries(sql: Queryable, projectId: string) {
  const [row] = await sql<{ running: number; kept: number }[]>`
    select count(*) filter (where state = 'running')::int as running, count(*)::int as kept
    from recoveries where project_id = ${projectId}`;
  return row ?? { running: 0, kept: 0 };
}

/**
 * A job's columns, its progress as it is now: the counts its steps settled, and its replays not
 * settled yet (at most a window of them) by their requests' statuses.
 */
const columns = (sql: Queryable) => sql`
  id as recovery_id, project_id, filter, state, error, matched, credits::int,
  recoveries.sent + live.sent as sent, recoveries.failed + live.failed as failed, live.running,
  skipped, exhausted, created_at, updated_at, finished_at,
  case when cursor_id is null then null else json_build_array(cursor_received_at, cursor_id) end
    as cursor`;

const withLiveProgress = (sql: Queryable) => sql`
  cross join lateral (
    select
      count(*) filter (where r.status = 'delivered')::int as sent,
      count(*) filter (where r.status in ${sql(finishedStatuses.filter((s) => s !== "delivered"))})::int as failed,
      count(*) filter (where r.status not in ${sql(finishedStatuses)})::int as running
    from recovery_replays rr join requests r on r.id = rr.request_id
    where rr.recovery_id = recoveries.id and rr.outcome is null) live`;

export async function findRecovery(
  sql: Queryable,
  recoveryId: string,
  projectId?: string,
): Promise<RecoveryRow | undefined> {
  const [row] = await sql<(RecoveryRow & { cursor: [string, string] | null })[]>`
    select ${columns(sql)} from recoveries ${withLiveProgress(sql)}
    where id = ${recoveryId} ${projectId === undefined ? sql`` : sql`and project_id = ${projectId}`}`;
  return row && { ...row, cursor: row.cursor && [new Date(row.cursor[0]), row.cursor[1]] };
}

/** A project's jobs, newest first. */
export function listRecoveries(sql: Sql, projectId: string, limit: number): Promise<RecoveryRow[]> {
  return sql<RecoveryRow[]>`
    select ${columns(sql)} from recoveries ${withLiveProgress(sql)}
    where project_id = ${projectId}
    order by created_at desc, id desc limit ${limit}`;
}

/**
 * Takes up `requestId` for the job in the caller's transaction, before its replay begins; false
 * when the job took it up already (a step taken twice, or one racing it), so nothing replays
 * twice, or when it no longer runs. The job's row is held until the transaction ends, so a
 * cancel waits for it and then finds this replay among the job's.
 */
export async function takeUp(tx: Queryable, recoveryId: string, requestId: string) {
  const [taken] = await tx`
    insert into recovery_replays (recovery_id, request_id, replay)
    select id, ${requestId}, 0 from recoveries
    where id = ${recoveryId} and state = 'running' for share
    on conflict do nothing returning request_id`;
  return taken !== undefined;
}

/** A replay the job took up whose start was made. */
export async function replayLaunched(sql: Queryable, recoveryId: string, requestId: string) {
  await sql`
    update recovery_replays set started = true
    where recovery_id = ${recoveryId} and request_id = ${requestId}`;
}

/** The number of the replay that began for a request the job took up. */
export async function numberReplay(
  tx: Queryable,
  recoveryId: string,
  requestId: string,
  { replay, was }: ReplayBegun,
): Promise<void> {
  await tx`
    update recovery_replays set replay = ${replay}, was = ${was}
    where recovery_id = ${recoveryId} and request_id = ${requestId}`;
}

export interface RunningReplay extends ReplayBegun {
  requestId: string;
  status: RequestStatus;
  /** Begun over `LOST_START_SECONDS` ago and its start not made: its step died in between. */
  startLost: boolean;
}

/** Past this, a replay that began without its start being made lost it. */
const LOST_START_SECONDS = 15;

/** The job's replays not yet settled, with their requests' statuses now. */
export function runningReplays(sql: Queryable, recoveryId: string): Promise<RunningReplay[]> {
  return sql<RunningReplay[]>`
    select rr.request_id, rr.replay, rr.was, r.status,
      not rr.started and rr.taken_at < now() - make_interval(secs => ${LOST_START_SECONDS})
        as start_lost
    from recovery_replays rr
    join requests r on r.id = rr.request_id
    where rr.recovery_id = ${recoveryId} and rr.outcome is null`;
}

export interface RecoveryStep {
  settled: { requestId: string; outcome: "sent" | "failed" }[];
  /** The last match taken up (or skipped) in this step, when it went on. */
  cursor?: [Date, string];
  skipped: number;
  exhausted: boolean;
  /** The state it moves to, and why when it failed. */
  state?: { to: RecoveryState; error?: string };
  finished: boolean;
}

/** Records a step: its replays settled, its place, its counts, and its end. */
export async function recordStep(sql: Sql, recoveryId: string, step: RecoveryStep): Promise<void> {
  await sql.begin(async (tx) => {
    const settled = await tx<{ outcome: "sent" | "failed" }[]>`
      update recovery_replays rr set outcome = s.outcome
      from jsonb_to_recordset(${tx.json(
        step.settled.map((r) => ({ request_id: r.requestId, outcome: r.outcome })),
      )}) as s(request_id text, outcome text)
      where rr.recovery_id = ${recoveryId} and rr.request_id = s.request_id and rr.outcome is null
      returning rr.outcome`;
    const sent = settled.filter((s) => s.outcome === "sent").length;
    const [at, id] = step.cursor ?? [null, null];
    await tx`
      update recoveries set
        sent = sent + ${sent},
        failed = failed + ${settled.length - sent},
        skipped = skipped + ${step.skipped},
        cursor_received_at = coalesce(${at}, cursor_received_at),
        cursor_id = coalesce(${id}, cursor_id),
        exhausted = exhausted or ${step.exhausted},
        state = case when state = 'running' then coalesce(${step.state?.to ?? null}, state) else state end,
        error = coalesce(error, ${step.state?.error ?? null}),
        finished_at = case when ${step.finished} then coalesce(finished_at, now()) else finished_at end,
        updated_at = now()
      where id = ${recoveryId}`;
  });
}

/** Cancels a running job: it starts nothing more, and its replays under way are cancelled. */
export async function cancelRecovery(
  sql: Queryable,
  projectId: string,
  recoveryId: string,
): Promise<boolean> {
  const cancelled = await sql`
    update recoveries set state = 'cancelled', updated_at = now()
    where id = ${recoveryId} and project_id = ${projectId} and state = 'running'
    returning id`;
  return cancelled.length > 0;
}
