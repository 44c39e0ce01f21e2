/**
 * Flow control's state (core/flow.ts; migration 017): each limited target's pace
 * (`target_flow`, its row the lock every start takes) and its attempts in flight (`flow_slots`,
 * each freed by its attempt's end, or at its expiry when its worker was lost).
 */
import { type FlowLimits, flowStart, hasPlace, roomToRelease } from "../core/flow.ts";
import type { DeliveryTarget } from "../core/model.ts";
import type { Charge } from "./credits.ts";
import type { Queryable, Sql } from "./db.ts";

/** An attempt lost with its worker frees its place this long after its target's timeout. */
const LOST_SLOT_GRACE_SECONDS = 60;
/**
 * A delivery let go keeps its booked place this long: one whose workflow is slow to come (a busy
 * worker) or gone frees it for the next one (arriving later, it takes a place as any would).
 */
const BOOKING_SECONDS = 10;

/**
 * Books a start at a limited target's pace for a request's delivery: answers how long to wait
 * for it (at most core/flow.ts FLOW_HORIZON_MS), or null when there is none for it now.
 * Postgres' clock decides, so every worker keeps one pace.
 */
export function bookStart(
  sql: Sql,
  targetId: string,
  limits: FlowLimits,
  requestId: string,
  fromQueue: boolean,
): Promise<number | null> {
  return sql.begin(async (tx) => {
    const pace = await lockFlow(tx, targetId);
    // Read after the lock, in a statement of its own: its snapshot sees every start before it.
    const [row] = await tx<{ booked: boolean; othersWaiting: boolean }[]>`
      select
        exists (select 1 from flow_slots
          where target_id = ${targetId} and request_id = ${requestId}) as booked,
        exists (select 1 from held_deliveries where target_id = ${targetId}) as others_waiting`;
    if (!row) return null;
    const state = { nextStartAtMs: pace.nextStartAtMs, othersWaiting: row.othersWaiting };
    const start = flowStart(state, limits, pace.nowMs, fromQueue || row.booked);
    if (!start) return null;
    await tx`
      update target_flow set next_start_at = to_timestamp(${start.nextStartAtMs / 1000})
      where target_id = ${targetId}`;
    return start.startAtMs - pace.nowMs;
  });
}

/**
 * Takes a place among a limited target's attempts in flight, at the attempt's start: false when
 * they are all taken. Its booking, when its drain let it go, becomes the place.
 */
export function takePlace(
  sql: Sql,
  target: Pick<DeliveryTarget, "id" | "timeoutSeconds">,
  limits: FlowLimits,
  requestId: string,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    await lockFlow(tx, target.id);
    const [row] = await tx<{ inFlight: number }[]>`
      select count(*)::int as in_flight from flow_slots
      where target_id = ${target.id} and request_id <> ${requestId} and started
        and expires_at > now()`;
    if (!hasPlace(limits, row?.inFlight ?? 0)) return false;
    if (limits.maxConcurrent === null) {
      await tx`delete from flow_slots where target_id = ${target.id} and request_id = ${requestId}`;
      return true;
    }
    await tx`
      insert into flow_slots (target_id, request_id, expires_at)
      values (${target.id}, ${requestId},
        now() + make_interval(secs => ${target.timeoutSeconds + LOST_SLOT_GRACE_SECONDS}))
      on conflict (target_id, request_id) do update
      set started = true, expires_at = excluded.expires_at`;
    return true;
  });
}

/** Takes a limited target's pace row (made when missing): every start and release is in turn. */
async function lockFlow(
  tx: Queryable,
  targetId: string,
): Promise<{ nextStartAtMs: number; nowMs: number }> {
  await tx`insert into target_flow (target_id) values (${targetId}) on conflict do nothing`;
  const [row] = await tx<{ nextStartAtMs: number; nowMs: number }[]>`
    select extract(epoch from next_start_at) * 1000 as next_start_at_ms,
      extract(epoch from now()) * 1000 as now_ms
    from target_flow where target_id = ${targetId}
    for update`;
  return { nextStartAtMs: Number(row?.nextStartAtMs ?? 0), nowMs: Number(row?.nowMs ?? 0) };
}

/**
 * Of `wanted` waiting deliveries a limited target's drain would let go, how many may go now
 * (core/flow.ts `roomToRelease`), under its pace row's lock. Each one let go is then booked
 * (`bookReleased`) until it starts, so those on their way count.
 */
export async function releasable(
  tx: Queryable,
  targetId: string,
  limits: FlowLimits,
  wanted: number,
): Promise<number> {
  await lockFlow(tx, targetId);
  const [counts] = await tx<{ started: number; onTheirWay: number }[]>`
    select count(*) filter (where started)::int as started,
      count(*) filter (where not started)::int as on_their_way
    from flow_slots where target_id = ${targetId} and expires_at > now()`;
  return roomToRelease(limits, wanted, counts ?? { started: 0, onTheirWay: 0 });
}

/** Books places for deliveries let go from the queue, until they start (or the grace ends). */
export async function bookReleased(
  tx: Queryable,
  targetId: string,
  requestIds: readonly string[],
): Promise<void> {
  if (requestIds.length === 0) return;
  await tx`
    insert into flow_slots (target_id, request_id, started, expires_at)
    select ${targetId}, id, false, now() + make_interval(secs => ${BOOKING_SECONDS})
    from unnest(${requestIds}::text[]) as id
    on conflict (target_id, request_id) do update
    set started = false, expires_at = excluded.expires_at`;
}

/** Frees the places of ended attempts at limited targets, by (request, target). */
export async function freeFlowSlots(
  q: Queryable,
  deliveries: readonly Pick<Charge, "requestId" | "targetId">[],
): Promise<void> {
  if (deliveries.length === 0) return;
  await q`
    delete from flow_slots s
    using unnest(${deliveries.map((d) => d.requestId)}::text[],
      ${deliveries.map((d) => d.targetId)}::text[]) as d (request_id, target_id)
    where s.request_id = d.request_id and s.target_id = d.target_id`;
}
