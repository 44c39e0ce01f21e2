/**
 * Ordered delivery's lanes (core/lanes.ts, `lane_entries`, migration 024): per lane and async
 * target, the requests in join order. The lowest entry not done is the head and has the turn; a
 * request's workflow delivers to a target only in its turn, and passes the turn on when its series
 * of attempts there ends. Every change to a lane takes the lane's lock first, so a join's place,
 * a claim and a hand-over never interleave.
 */
import type { Sql, Transaction } from "./db.ts";

/** The advisory lock's first key (any constant); the lane's hash is the second. */
const LANE_LOCK = 7_243_005;

/** Until the caller's commit: each of these runs in a transaction. */
async function lockLane(tx: Transaction, laneId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(${LANE_LOCK}, hashtext(${laneId}))`;
}

/** Whether a request may deliver to a target now, or waits for the signal of its turn. */
export type Turn = "turn" | "wait";

/** A parked request given its turn at a target: its workflow is signalled. */
export interface TurnGiven {
  laneId: string;
  requestId: string;
  targetId: string;
}

/**
 * A request joins its lane behind everything there, at each target in order; a join repeated
 * (a retried call, an Idempotency-Key's repeat) joins nothing. True when it joined anew.
 */
export async function joinLane(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
): Promise<boolean> {
  await lockLane(q, laneId);
  const joined = await q`
    insert into lane_entries (lane_id, target_id, request_id)
    select ${laneId}, t.id, ${requestId}
    from unnest(${targetIds}::text[]) with ordinality as t(id, n) order by t.n
    on conflict (request_id, lane_id, target_id) do nothing`;
  return joined.count > 0;
}

/**
 * Calls accepted together join their lanes, in their order; the lanes locked in one order (by
 * id) whatever the calls', so two acceptances never wait on each other's locks.
 */
export async function joinLanes(
  q: Transaction,
  places: { laneId: string; requestId: string; targetIds: string[] }[],
): Promise<void> {
  const byLane = [...places].sort((a, b) =>
    a.laneId < b.laneId ? -1 : a.laneId > b.laneId ? 1 : 0,
  );
  for (const { laneId, requestId, targetIds } of byLane) {
    await joinLane(q, laneId, requestId, targetIds);
  }
}

/**
 * A request's turn at each of its targets: the head of a target's queue takes it. With `park`
 * (the request's own workflow claims, and waits for the signal `leaveLane` answers for), the
 * others park; without (a batch claims for a request whose workflow is yet to start, so no signal
 * could reach it), they wait unparked and find their turn when that workflow claims. A request
 * with no entry at a target (its join lost, or its entry left on its behalf) is not held back.
 */
export async function claimTurns(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
  park = true,
): Promise<Record<string, Turn>> {
  await lockLane(q, laneId);
  await q`
    update lane_entries e set turn = true, changed_at = now()
    where e.lane_id = ${laneId} and e.request_id = ${requestId}
      and e.target_id = any(${targetIds}::text[]) and e.done_at is null and not e.turn
      and not exists (
        select 1 from lane_entries o
        where o.lane_id = e.lane_id and o.target_id = e.target_id and o.done_at is null
          and o.seq < e.seq)`;
  const waiting = await q<{ targetId: string }[]>`
    update lane_entries set parked = parked or ${park}
    where lane_id = ${laneId} and request_id = ${requestId}
      and target_id = any(${targetIds}::text[]) and done_at is null and not turn
    returning target_id`;
  const waits = new Set(waiting.map((p) => p.targetId));
  return Object.fromEntries(targetIds.map((id) => [id, waits.has(id) ? "wait" : "turn"]));
}

/**
 * A request leaves its lane at these targets (its series there ended, it was cancelled, or its
 * workflow is gone), and each target's next request gets the turn. Answers the heads there that
 * have the turn and are parked: their workflows wait for a signal (one told before is told again,
 * harmlessly, so a retried leave loses no signal); one not parked finds its turn when it claims.
 */
export async function leaveLane(
  q: Transaction,
  laneId: string,
  requestId: string,
  targetIds: string[],
): Promise<TurnGiven[]> {
  await lockLane(q, laneId);
  await q`
    update lane_entries set done_at = now(), changed_at = now()
    where lane_id = ${laneId} and request_id = ${requestId}
      and target_id = any(${targetIds}::text[]) and done_at is null`;
  // Each target's head by the index, whatever the queue's length behind it.
  const heads = await q<(TurnGiven & { seq: string; turn: boolean; parked: boolean })[]>`
    select h.* from unnest(${targetIds}::text[]) as t(id) cross join lateral (
      select lane_id, request_id, target_id, seq, turn, parked from lane_entries
      where lane_id = ${laneId} and target_id = t.id and done_at is null
      order by seq limit 1
    ) h`;
  const given = heads.filter((h) => !h.turn);
  if (given.length > 0) {
    await q`
      update lane_entries set turn = true, changed_at = now()
      where lane_id = ${laneId} and (target_id, seq) in (
        select * from unnest(${given.map((h) => h.targetId)}::text[], ${given.map((h) => h.seq)}::bigint[]))`;
  }
  return heads
    .filter((h) => h.parked)
    .map(({ laneId, requestId, targetId }) => ({ laneId, requestId, targetId }));
}

/** Tells parked requests their turn came; answers those whose workflows are gone. */
export type TellTurns = (given: TurnGiven[]) => Promise<TurnGiven[]>;

/**
 * Requests leave their lanes (`leaveLane`), and the parked ones given the turn are told; one
 * whose workflow is gone leaves in its turn too, so a lane never waits on it.
 */
export async function passTurns(
  sql: Sql,
  left: { laneId: string; requestId: string; targetIds: string[] }[],
  tell: TellTurns,
): Promise<void> {
  let leaving = left;
  while (leaving.length > 0) {
    const given = await Promise.all(
      leaving.map(({ laneId, requestId, targetIds }) =>
        sql.begin((tx) => leaveLane(tx, laneId, requestId, targetIds)),
      ),
    );
    leaving = (await tell(given.flat())).map(({ laneId, requestId, targetId }) => ({
      laneId,
      requestId,
      targetIds: [targetId],
    }));
  }
}

/** A lane's head that has not moved for a while: its workflow may be gone (`lane-sweep`). */
export interface StillHead {
  laneId: string;
  targetId: string;
  requestId: string;
}

/**
 * Heads unchanged for `forMs` (the database's clock), at most `limit`, marked as looked at (so the
 * next look comes after as long): a head delivering for hours is normal; one whose workflow was
 * terminated by hand, or whose edge died between its join and its start, holds its lane.
 */
export async function stillHeads(sql: Sql, forMs: number, limit: number): Promise<StillHead[]> {
  return sql<StillHead[]>`
    update lane_entries e set changed_at = now()
    from (
      select lane_id, target_id, seq from (
        select distinct on (lane_id, target_id) lane_id, target_id, seq, changed_at
        from lane_entries where done_at is null order by lane_id, target_id, seq
      ) heads
      where changed_at < now() - make_interval(secs => ${forMs / 1000}) limit ${limit}
    ) still
    where e.lane_id = still.lane_id and e.target_id = still.target_id and e.seq = still.seq
    returning e.lane_id, e.target_id, e.request_id`;
}

/** Entries left before `before` are forgotten (the log's retention), at most `limit`. */
export async function pruneLaneEntries(sql: Sql, before: Date, limit: number): Promise<number> {
  const pruned = await sql`
    delete from lane_entries where (lane_id, target_id, seq) in (
      select lane_id, target_id, seq from lane_entries where done_at < ${before} limit ${limit})`;
  return pruned.count;
}
