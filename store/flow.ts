/**
 * Flow control's state (core/flow.ts; migration 017): each limited target's pace
 * (`target_flow`, its row the lock every start takes) and its attempts in flight (`flow_slots`,
 * each freed by its attempt's end, or at its expiry when its worker was lost).
 */
import { type FlowLimits, flowStart } from "../core/flow.ts";
import type { DeliveryTarget } from "../core/model.ts";
import type { Charge } from "./credits.ts";
import type { Queryable, Sql } from "./db.ts";

/** An attempt lost with its worker frees its place this long after its target's timeout. */
const LOST_SLOT_GRACE_SECONDS = 60;

/**
 * Books a start at a limited target for a request's delivery: answers how long to wait for it
 * (at most core/flow.ts FLOW_HORIZON_MS), or null when there is no room now. Postgres' clock
 * decides, so every worker keeps one pace.
 */
export function takeFlowSlot(
  sql: Sql,
  target: Pick<DeliveryTarget, "id" | "timeoutSeconds">,
  limits: FlowLimits,
  requestId: string,
  fromQueue: boolean,
): Promise<number | null> {
  return sql.begin(async (tx) => {
    await tx`insert into target_flow (target_id) values (${target.id}) on conflict do nothing`;
    const [row] = await tx<
      { nextStartAtMs: number; nowMs: number; inFlight: number; othersWaiting: boolean }[]
    >`
      select extract(epoch from next_start_at) * 1000 as next_start_at_ms,
        extract(epoch from now()) * 1000 as now_ms,
        (select count(*)::int from flow_slots s
          where s.target_id = f.target_id and s.expires_at > now()) as in_flight,
        exists (select 1 from held_deliveries h where h.target_id = f.target_id) as others_waiting
      from target_flow f where f.target_id = ${target.id}
      for update`;
    if (!row) return null;
    const nowMs = Number(row.nowMs);
    const state = { ...row, nextStartAtMs: Number(row.nextStartAtMs) };
    const start = flowStart(state, limits, nowMs, fromQueue);
    if (!start) return null;
    await tx`
      update target_flow set next_start_at = to_timestamp(${start.nextStartAtMs / 1000})
      where target_id = ${target.id}`;
    if (limits.maxConcurrent !== null) {
      await tx`
        insert into flow_slots (target_id, request_id, expires_at)
        values (${target.id}, ${requestId},
          now() + make_interval(secs => ${target.timeoutSeconds + LOST_SLOT_GRACE_SECONDS}))
        on conflict (target_id, request_id) do update set expires_at = excluded.expires_at`;
    }
    return start.startAtMs - nowMs;
  });
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

/** A limited target's attempts in flight now. */
export async function flowInFlight(q: Queryable, targetId: string): Promise<number> {
  const [row] = await q<{ count: number }[]>`
    select count(*)::int as count from flow_slots
    where target_id = ${targetId} and expires_at > now()`;
  return row?.count ?? 0;
}
