/**
 * Ordered delivery's lanes (core/lanes.ts, `lane_entries`, migration 024): per lane and async
 * target, the requests in join order. The lowest entry not done is the head and has the turn; a
 * request's workflow delivers to a target only in its turn, and passes the turn on when its series
 * of attempts there ends. Every change to a lane takes the lane's lock first, so a join's place,
 * a claim and a hand-over never interleave; a transaction that also counts waiting deliveries
 * (store/waiting.ts) takes the project's waiting lock before any lane's.
 */
import type postgres from "postgres";
import { pipelinedTransaction, type Sql, type Transaction } from "./db.ts";

/** The advisory lock's first key (any constant); the lane's hash is the second. */
const LANE_LOCK = 7_243_005;

/**
 * Every lane of these, until the caller's commit, locked in one order (the locks' keys
 * ascending), so two transactions that lock several lanes never wait on each other's.
 */
function lockLanes(tx: Transaction, laneIds: string[]): Promise<unknown> {
  // Sent now (not on a later `then`), so statements sent after it are behind it in a pipeline.
  return tx`
    select pg_advisory_xact_lock(${LANE_LOCK}, k) from (
      select distinct hashtext(id) as k from unnest(${laneIds}::text[]) as t(id) order by k
    ) keys`.execute();
}

/** Whether a request may deliver to a target now, or waits for the signal of its turn. */
export type Turn = "turn" | "wait";

/** A parked request given its turn at a target: the workflow carrying it is signalled. */
export interface TurnGiven {
  laneId: string;
  requestId: string;
  targetId: string;
  /** Its carrier (a batch holding it, migration 025), or the request's own workflow. */
  workflowId: string;
}

/** A request's place in its lane, at each of its async targets (a join's, or a claim's). */
export interface LaneClaim {
  laneId: string;
  requestId: string;
  targetIds: string[];
}

/** The places' (lane, request, target) triples, as arrays for `unnest`. */
function triples(places: LaneClaim[]) {
  const flat = places.flatMap(({ laneId, requestId, targetIds }) =>
    targetIds.map((targetId) => ({ laneId, requestId, targetId })),
  );
  return {
    lanes: flat.map((t) => t.laneId),
    requests: flat.map((t) => t.requestId),
    targets: flat.map((t) => t.targetId),
  };
}

const entryKey = (laneId: string, requestId: string, targetId: string) =>
  `${laneId}\n${requestId}\n${targetId}`;

/**
 * Requests join their lanes behind everything there, in the order given (at each target in
 * order); a join repeated (a retried call, an Idempotency-Key's repeat) joins nothing. Answers
 * which requests joined anew.
 */
async function joinAll(q: Transaction, places: LaneClaim[]): Promise<Set<string>> {
  const { lanes, requests, targets } = triples(places);
  // Sent together, run in order: the lock, then the join.
  const locked = lockLanes(
    q,
    places.map((p) => p.laneId),
  );
  const joining = q<{ requestId: string }[]>`
    insert into lane_entries (lane_id, target_id, request_id)
    select l, t, r from unnest(${lanes}::text[], ${targets}::text[], ${requests}::text[])
      with ordinality as p(l, t, r, n)
    order by p.n
    on conflict (request_id, lane_id, target_id) do nothing
    returning request_id`.execute();
  const [, joined] = await Promise.all([locked, joining]);
  return new Set(joined.map((row) => row.requestId));
}

/** A request joins its lane (`joinAll`): true when it joined anew. */
export async function joinLane(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
): Promise<boolean> {
  return (await joinAll(q, [{ laneId, requestId, targetIds }])).has(requestId);
}

/**
 * Calls accepted together join their lanes, in their order, in one statement. Answers how many
 * had a place already (their edge, not answered in time, took the place for a start of its own).
 */
export async function joinLanes(q: Transaction, places: LaneClaim[]): Promise<number> {
  if (places.length === 0) return 0;
  const joined = await joinAll(q, places);
  return places.filter((p) => !joined.has(p.requestId)).length;
}

/**
 * Requests' turns at their targets, each lane's in the order given: the head of a target's queue
 * takes it, the others park and wait for the signal `leaveLanes` answers for. A parked entry is
 * carried by `carrier` (a batch, ../workflows/batch-holds.ts) or, without one, by the request's
 * own workflow, which so takes it over from a batch. A request with no entry at a target (its
 * join lost, or its entry left on its behalf) is not held back.
 */
export async function claimTurnsInOrder(
  q: Transaction,
  claims: LaneClaim[],
  carrier: string | null,
): Promise<Record<string, Turn>[]> {
  if (claims.length === 0) return [];
  const { lanes, requests, targets } = triples(claims);
  // Sent together, run in order (one round trip): the lock, the heads' turns, then every claim.
  const locked = lockLanes(
    q,
    claims.map((c) => c.laneId),
  );
  const headsTurn = q`
    update lane_entries e set turn = true, changed_at = now()
    from unnest(${lanes}::text[], ${requests}::text[], ${targets}::text[])
      as c(lane_id, request_id, target_id)
    where e.lane_id = c.lane_id and e.request_id = c.request_id and e.target_id = c.target_id
      and e.done_at is null and not e.turn
      and not exists (
        select 1 from lane_entries o
        where o.lane_id = e.lane_id and o.target_id = e.target_id and o.done_at is null
          and o.seq < e.seq)`.execute();
  const claimed = q<{ laneId: string; requestId: string; targetId: string; turn: boolean }[]>`
    update lane_entries e set parked = not e.turn, carrier = ${carrier}, owed = false
    from unnest(${lanes}::text[], ${requests}::text[], ${targets}::text[])
      as c(lane_id, request_id, target_id)
    where e.lane_id = c.lane_id and e.request_id = c.request_id and e.target_id = c.target_id
      and e.done_at is null
    returning e.lane_id, e.request_id, e.target_id, e.turn`.execute();
  const [, , entries] = await Promise.all([locked, headsTurn, claimed]);
  const waits = new Set(
    entries.filter((e) => !e.turn).map((e) => entryKey(e.laneId, e.requestId, e.targetId)),
  );
  return claims.map(({ laneId, requestId, targetIds }) =>
    Object.fromEntries(
      targetIds.map((id) => [id, waits.has(entryKey(laneId, requestId, id)) ? "wait" : "turn"]),
    ),
  );
}

/** A request's turns at its targets (`claimTurnsInOrder`), carried by its own workflow. */
export async function claimTurns(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
): Promise<Record<string, Turn>> {
  const [turns] = await claimTurnsInOrder(q, [{ laneId, requestId, targetIds }], null);
  return turns ?? {};
}

/**
 * A batch lets these requests go on as workflows of their own: their entries it carried are
 * unparked, so a turn given them meanwhile is found by their own claim, not signalled to a batch
 * that may be gone (whose signal failing would pass them over).
 */
export async function releaseCarried(
  q: Sql | Transaction,
  carrier: string,
  requestIds: string[],
): Promise<void> {
  await q`
    update lane_entries set parked = false, carrier = null
    where request_id = any(${requestIds}::text[]) and carrier = ${carrier} and done_at is null`;
}

/** Requests leaving their lane at targets; `carriedBy`: only if that carrier (gone) still has them. */
export interface Leaving extends LaneClaim {
  carriedBy?: string | undefined;
}

/**
 * Requests leave their lanes at these targets (a series there ended, a cancel, or a workflow
 * gone), and each target's next request gets the turn. Answers the heads there that have the
 * turn and are parked: their carriers wait for a signal (one told before is told again,
 * harmlessly, so a retried leave loses no signal); one not parked finds its turn when it claims.
 * With `carriedBy` (its carrier gone), a request leaves only entries that carrier still carries:
 * one a batch let go meanwhile is its own workflow's now.
 */
export async function leaveLanes(q: Transaction, leaving: Leaving[]): Promise<TurnGiven[]> {
  if (leaving.length === 0) return [];
  const { lanes, requests, targets } = triples(leaving);
  const carriers = leaving.flatMap((l) => l.targetIds.map(() => l.carriedBy ?? null));
  // Sent together, run in order: the lock, the leave, then (below) the heads, one round trip.
  const locked = lockLanes(
    q,
    leaving.map((l) => l.laneId),
  );
  const left = q<{ laneId: string; targetId: string }[]>`
    update lane_entries e set done_at = now(), changed_at = now()
    from unnest(${lanes}::text[], ${requests}::text[], ${targets}::text[], ${carriers}::text[])
      as l(lane_id, request_id, target_id, carried_by)
    where e.lane_id = l.lane_id and e.request_id = l.request_id and e.target_id = l.target_id
      and e.done_at is null
      and (l.carried_by is null or coalesce(e.carrier, e.request_id) = l.carried_by)
    returning e.lane_id, e.target_id`.execute(); // sent now, behind the lock, before the heads
  // A retried leave (nothing left) still answers the heads, so no signal is lost; one on behalf
  // of a gone carrier that left nothing answers none, so its heads wait for what it left.
  const queues = new Map<string, { laneId: string; targetId: string }>();
  for (const l of leaving) {
    if (l.carriedBy !== undefined) continue;
    for (const targetId of l.targetIds)
      queues.set(`${l.laneId}\n${targetId}`, { laneId: l.laneId, targetId });
  }
  if (leaving.some((l) => l.carriedBy !== undefined)) {
    const [, gone] = await Promise.all([locked, left]);
    for (const l of gone) queues.set(`${l.laneId}\n${l.targetId}`, l);
  }
  const [, , heads] = await Promise.all([locked, left, headsGiven(q, [...queues.values()])]);
  return heads.map(({ laneId, requestId, targetId, workflowId }) => ({
    laneId,
    requestId,
    targetId,
    workflowId,
  }));
}

/**
 * Each queue's head (by the index, whatever the queue's length behind it) gets the turn; answers
 * those parked, whose carriers wait for a signal.
 */
function headsGiven(
  q: Transaction,
  queues: { laneId: string; targetId: string }[],
): Promise<TurnGiven[]> {
  if (queues.length === 0) return Promise.resolve([]);
  return q<TurnGiven[]>`
    with heads as (
      select h.* from unnest(${queues.map((a) => a.laneId)}::text[],
        ${queues.map((a) => a.targetId)}::text[]) as t(lane_id, target_id)
      cross join lateral (
        select lane_id, request_id, target_id, seq, turn, parked,
          coalesce(carrier, request_id) as workflow_id
        from lane_entries
        where lane_id = t.lane_id and target_id = t.target_id and done_at is null
        order by seq limit 1
      ) h
    ), given as (
      -- A parked head's carrier is owed its signal until it claims, or the sweep tells it again.
      update lane_entries e set turn = true, owed = h.parked, changed_at = now()
      from heads h
      where e.lane_id = h.lane_id and e.target_id = h.target_id and e.seq = h.seq
        and (not h.turn or (h.parked and not e.owed))
    )
    select lane_id, request_id, target_id, workflow_id from heads where parked`.execute();
}

/** A place left (`leaveLanes`) is forgotten: the request may join again, at the back. */
export async function forgetPlace(q: Sql | Transaction, place: LaneClaim): Promise<void> {
  await q`
    delete from lane_entries
    where lane_id = ${place.laneId} and request_id = ${place.requestId}
      and target_id = any(${place.targetIds}::text[]) and done_at is not null`;
}

/** One request leaves its lane at these targets (`leaveLanes`). */
export async function leaveLane(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
): Promise<TurnGiven[]> {
  return leaveLanes(q, [{ laneId, requestId, targetIds }]);
}

/** Tells parked requests' carriers their turn came; answers those whose carriers are gone. */
export type TellTurns = (given: TurnGiven[]) => Promise<TurnGiven[]>;

/**
 * Requests leave their lanes (`leaveLane`, all of a round in one transaction), and the parked
 * ones given the turn are told; one whose carrier is gone leaves in its turn too, so a lane never
 * waits on it. Turns given that `keep` keeps are not told but answered: the batch leaving them
 * attempts those requests itself.
 */
export async function passTurns(
  sql: Sql,
  left: Leaving[],
  tell: TellTurns,
  keep: (given: TurnGiven) => boolean = () => false,
): Promise<TurnGiven[]> {
  const kept: TurnGiven[] = [];
  let leaving = left;
  while (leaving.length > 0) {
    const round = leaving;
    const given = await pipelinedTransaction(sql, (tx) => leaveLanes(tx, round));
    kept.push(...given.filter(keep));
    leaving = (await tell(given.filter((g) => !keep(g)))).map(
      ({ laneId, requestId, targetId, workflowId }) => ({
        laneId,
        requestId,
        targetIds: [targetId],
        carriedBy: workflowId,
      }),
    );
  }
  return kept;
}

/**
 * At most `limit` of the `rows` found (lane_id, target_id, seq, changed_at), the oldest first,
 * projects taking turns (a lane's id names its project: one with many does not hold back
 * another's first), marked as looked at (changed_at), each only if still `changed_at` before
 * `since` under its row's lock, so two control planes' sweeps do not both answer it.
 */
function lookAt(
  sql: Sql,
  rows: postgres.Fragment,
  since: postgres.Fragment,
  limit: number,
): Promise<TurnGiven[]> {
  return sql<TurnGiven[]>`
    update lane_entries e set changed_at = now()
    from (
      select lane_id, target_id, seq from (
        select lane_id, target_id, seq, changed_at, row_number() over (
          partition by split_part(lane_id, ':', 2) order by changed_at) as place
        from (${rows}) found
        where changed_at < ${since}
      ) ranked
      order by place, changed_at limit ${limit}
    ) looked
    where e.lane_id = looked.lane_id and e.target_id = looked.target_id and e.seq = looked.seq
      and e.done_at is null and e.changed_at < ${since}
    returning e.lane_id, e.request_id, e.target_id, coalesce(e.carrier, e.request_id) as workflow_id`;
}

const before = (sql: Sql, forMs: number) => sql`now() - make_interval(secs => ${forMs / 1000})`;

/**
 * Heads unchanged for `forMs` (the database's clock), at most `limit`, looked at once per
 * interval (`lookAt`); a head's carrier may be gone (control/lane-sweep.ts): one delivering for
 * hours is normal; one whose workflow was terminated by hand, or whose edge died between its
 * join and its start, holds its lane.
 */
export function stillHeads(sql: Sql, forMs: number, limit: number): Promise<TurnGiven[]> {
  const heads = sql`
    select distinct on (lane_id, target_id) lane_id, target_id, seq, changed_at
    from lane_entries where done_at is null order by lane_id, target_id, seq`;
  return lookAt(sql, heads, before(sql, forMs), limit);
}

/**
 * Turns given to parked entries (`leaveLanes`) their carriers have not claimed for `forMs`: the
 * signal, sent after the leave's commit, may never have gone (its sender died, or Temporal was
 * down). At most `limit`, looked at once per interval (`lookAt`).
 */
export function owedTurns(sql: Sql, forMs: number, limit: number): Promise<TurnGiven[]> {
  const since = before(sql, forMs);
  const owed = sql`
    select lane_id, target_id, seq, changed_at from lane_entries
    where done_at is null and owed and parked and changed_at < ${since}`;
  return lookAt(sql, owed, since, limit);
}

/** Owed turns told again (`owedTurns`) are owed no more, unless a leave gives them again. */
export async function turnsTold(sql: Sql, told: TurnGiven[]): Promise<void> {
  if (told.length === 0) return;
  await sql`
    update lane_entries e set owed = false
    from unnest(${told.map((t) => t.laneId)}::text[], ${told.map((t) => t.requestId)}::text[],
      ${told.map((t) => t.targetId)}::text[]) as t(lane_id, request_id, target_id)
    where e.lane_id = t.lane_id and e.request_id = t.request_id and e.target_id = t.target_id
      and e.done_at is null and e.owed`;
}

/** Entries left before `before` are forgotten (the log's retention), at most `limit`. */
export async function pruneLaneEntries(sql: Sql, before: Date, limit: number): Promise<number> {
  const pruned = await sql`
    delete from lane_entries where (lane_id, target_id, seq) in (
      select lane_id, target_id, seq from lane_entries where done_at < ${before} limit ${limit})`;
  return pruned.count;
}
