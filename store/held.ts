/**
 * A target's waiting deliveries (`held_deliveries`, migrations 010 and 019): held while its
 * circuit is open, it is paused, or its flow limits are full, and let go by its circuit workflow
 * in the order Relay accepted them. Each change takes the target's lock row (store/circuits.ts)
 * first, so a delivery never waits on a target that was let go a moment before, and counts
 * against its project's cap on waiting deliveries (store/waiting.ts).
 */
import { type Hold, holdOf } from "../core/circuit.ts";
import { flowLimitsOf, THROTTLED } from "../core/flow.ts";
import { lockTarget } from "./circuits.ts";
import type { Sql } from "./db.ts";
import { bookReleased, releasable } from "./flow.ts";
import { changeHeld, type PlanCaps } from "./waiting.ts";

/**
 * Holds a delivery for its target when something still holds it: answers why, or null when the
 * target may be tried now (the delivery goes on instead of waiting). Counted against its
 * project's cap on waiting deliveries (store/waiting.ts).
 */
export function holdDelivery(
  sql: Sql,
  targetId: string,
  workflowId: string,
  caps: PlanCaps,
  /** When Relay accepted the delivery's request: held deliveries go in this order. */
  acceptedAt?: Date,
): Promise<Hold | typeof THROTTLED | null> {
  return sql.begin(async (tx) => {
    const gate = await lockTarget(tx, targetId);
    // A limited target's waiting deliveries go when its drain lets them (core/flow.ts).
    const hold = gate ? (holdOf(gate) ?? (gate.limited ? THROTTLED : null)) : null;
    await changeHeld(tx, { targetId }, caps, async (q) => {
      // The place its call took as it was accepted, if any, becomes the held delivery itself;
      // one let go meanwhile needs it no more.
      const placed = await q`
        delete from held_places where request_id = ${workflowId} and target_id = ${targetId}`;
      const held = hold
        ? (
            await q`
              insert into held_deliveries (target_id, workflow_id, request_id, accepted_at)
              values (${targetId}, ${workflowId}, ${workflowId}, ${acceptedAt ?? new Date()})
              on conflict do nothing`
          ).count
        : // Let go without a release (it looked again itself): it waits no more.
          -(
            await q`
              delete from held_deliveries
              where target_id = ${targetId} and workflow_id = ${workflowId}`
          ).count;
      return held - placed.count;
    });
    return hold;
  });
}

/** A delivery that waits in a batch's workflow for its limited target's room. */
export interface HeldInBatch {
  targetId: string;
  requestId: string;
  /** When Relay accepted the request: held deliveries go in this order. */
  acceptedAt: string;
}

/**
 * Holds deliveries of one batch (workflows/batch-holds.ts) for their limited targets, in place of
 * the requests' own workflows. Each is held however its target stands: a target let go meanwhile
 * has its drain let the batch's go. Counted against their project's cap on waiting deliveries.
 */
export async function holdInBatch(
  sql: Sql,
  workflowId: string,
  held: readonly HeldInBatch[],
  caps: PlanCaps,
): Promise<void> {
  for (const targetId of new Set(held.map((h) => h.targetId))) {
    const ofTarget = held.filter((h) => h.targetId === targetId);
    await sql.begin((tx) =>
      changeHeld(tx, { targetId }, caps, async (q) => {
        const rows = await q`
          insert into held_deliveries (target_id, workflow_id, request_id, accepted_at)
          select ${targetId}, ${workflowId}, request_id, accepted_at
          from unnest(${ofTarget.map((h) => h.requestId)}::text[],
            ${ofTarget.map((h) => h.acceptedAt)}::timestamptz[]) as h (request_id, accepted_at)
          on conflict do nothing`;
        return rows.count;
      }),
    );
  }
}

/** A batch's held deliveries of these requests wait there no more (they go on on their own). */
export async function forgetHeldInBatch(
  sql: Sql,
  workflowId: string,
  requestIds: readonly string[],
  caps: PlanCaps,
): Promise<void> {
  const [requestId] = requestIds;
  if (requestId === undefined) return;
  // A batch's requests are all of one project.
  await sql.begin((tx) =>
    changeHeld(tx, { requestId }, caps, async (q) => {
      const rows = await q`
        delete from held_deliveries
        where workflow_id = ${workflowId} and request_id = any(${requestIds}::text[])`;
      return -rows.count;
    }),
  );
}

/** A waiting delivery let go: the workflow to tell, and its request. */
export interface Released {
  workflowId: string;
  requestId: string;
}

/**
 * Lets go of up to `limit` waiting deliveries, oldest first, when nothing holds the target (or,
 * for a probe, when only its open circuit does).
 */
export function releaseHeld(
  sql: Sql,
  targetId: string,
  limit: number,
  caps: PlanCaps,
  probe = false,
): Promise<Released[]> {
  return sql.begin(async (tx) => {
    const gate = await lockTarget(tx, targetId);
    const hold = gate ? holdOf(gate) : null;
    if (hold !== null && !(probe && hold === "circuit_open")) return [];
    // A limited target's: as many as it has room for, each booked its place (core/flow.ts).
    const limits = gate ? flowLimitsOf(gate) : null;
    const room = limits && !probe ? await releasable(tx, targetId, limits, limit) : limit;
    let released: Released[] = [];
    await changeHeld(tx, { targetId }, caps, async (q) => {
      released = await q<Released[]>`
        delete from held_deliveries where (target_id, workflow_id, request_id) in (
          select target_id, workflow_id, request_id from held_deliveries
          where target_id = ${targetId}
          order by accepted_at, held_at limit ${room})
        returning workflow_id, request_id`;
      return -released.length;
    });
    if (limits && !probe) {
      await bookReleased(
        tx,
        targetId,
        released.map((r) => r.requestId),
      );
    }
    return released;
  });
}

/**
 * Targets deleted (with their endpoint or line) while deliveries were still held for them, up to
 * `limit`: their circuit workflows let those go, to end.
 */
export async function goneTargetsHolding(sql: Sql, limit: number): Promise<string[]> {
  const rows = await sql<{ targetId: string }[]>`
    select distinct h.target_id from held_deliveries h
    where not exists (select 1 from targets t where t.id = h.target_id)
    limit ${limit}`;
  return rows.map((row) => row.targetId);
}
