/**
 * Credits as stored: a ledger per project and pool (grants positive, one charge per delivery that
 * reached its target), and each pool's running balance and use beside it (migration 007); the
 * holds of metered calls not yet settled, and their sum beside the balance (migration 012). A
 * pool emptying or refilling goes on the change feed, so edges refuse calls on an empty metered
 * pool (402) with no control-plane call; a call to a pool with credits reserves its holds first.
 */
import {
  type BatchReservation,
  type CreditHold,
  deliveryCredits,
  fittingCalls,
  holdKey,
  isMetered,
} from "../core/billing.ts";
import { type KeyMode, keyModes, type Plan } from "../core/model.ts";
import { recordChange } from "./changes.ts";
import type { Queryable, Sql, Transaction } from "./db.ts";

export interface PoolUsage {
  used: number;
  /** Null when the pool is unmetered (free-tier live traffic). */
  remaining: number | null;
  /** Of `remaining`, what calls accepted and not yet settled hold; null when unmetered. */
  held: number | null;
}

export interface Usage {
  plan: Plan;
  pools: Record<KeyMode, PoolUsage>;
}

export async function grantCredits(
  tx: Queryable,
  projectId: string,
  pool: KeyMode,
  amount: number,
) {
  await tx`
    insert into credit_ledger (project_id, pool, amount, reason)
    values (${projectId}, ${pool}, ${amount}, 'grant')`;
  await recordChange(tx, projectId, "routing");
}

export async function poolUsage(sql: Sql, projectId: string, plan: Plan): Promise<Usage> {
  const rows = await sql<{ pool: KeyMode; used: string; balance: string; held: string }[]>`
    select pool, used, balance, held from credit_pools where project_id = ${projectId}`;
  const pool = (mode: KeyMode): PoolUsage => {
    const row = rows.find((r) => r.pool === mode);
    const metered = isMetered(plan, mode);
    return {
      used: Number(row?.used ?? 0),
      remaining: metered ? Number(row?.balance ?? 0) : null,
      held: metered ? Number(row?.held ?? 0) : null,
    };
  };
  return { plan, pools: { live: pool("live"), test: pool("test") } };
}

/** The metered pools of a project that have nothing left. */
export async function exhaustedPools(sql: Sql, projectId: string, plan: Plan): Promise<KeyMode[]> {
  const { pools } = await poolUsage(sql, projectId, plan);
  return keyModes.filter(
    (mode) => pools[mode].remaining !== null && (pools[mode].remaining ?? 0) <= 0,
  );
}

export interface Charge {
  project: string;
  pool: KeyMode;
  requestId: string;
  targetId: string;
  bytes: number;
  /** A replay's number: its deliveries are charged apart from the call's (0, absent). */
  replay?: number | undefined;
}

export interface Reservation {
  /** The project's slug. */
  project: string;
  pool: KeyMode;
  requestId: string;
  holds: CreditHold[];
  /** A replay's number: it holds apart from the call and the replays before it (0, absent). */
  replay?: number;
}

/**
 * Holds a call's credits when they fit in what its pool has left (the balance less what is held),
 * all or none: one statement, under the pool row's lock, so calls reserving at once on any number
 * of edges take turns and the pool never promises more than it has. A repeat of a call (an
 * Idempotency-Key) holds nothing again for a delivery already held or charged, and always fits
 * when it adds nothing. False when the call does not fit (or the pool has never had credits).
 */
export async function reserveCredits(tx: Queryable, r: Reservation): Promise<boolean> {
  const [row] = await tx<{ reserved: boolean }[]>`
    with ${reservationSteps(tx, r)} select ${reservedOf(tx)} as reserved`;
  return row?.reserved ?? false;
}

/**
 * `reserveCredits`'s statement as the steps of a `with`: `wanted` (the holds the request lacks),
 * `pool` (the pool row, locked, when they fit; untouched when it lacks none) and `held` (their
 * insert). A statement that
 * names them goes on only where `reservedOf` holds.
 */
export function reservationSteps(q: Queryable, r: Reservation) {
  const replay = r.replay ?? 0;
  return q`
    wanted as (
      select w.target_id, w.amount
      from unnest(${r.holds.map((h) => h.targetId)}::text[], ${r.holds.map((h) => h.credits)}::bigint[])
        as w (target_id, amount)
      where not exists (select 1 from credit_holds h
          where h.request_id = ${r.requestId} and h.target_id = w.target_id
            and h.replay = ${replay})
        and not exists (select 1 from credit_ledger l
          where l.request_id = ${r.requestId} and l.target_id = w.target_id
            and l.replay = ${replay})
    ), pool as (
      select c.project_id, c.pool from credit_pools c join projects p on p.id = c.project_id
      where p.slug = ${r.project} and c.pool = ${r.pool}
        and c.balance - c.held >= (select coalesce(sum(amount), 0) from wanted)
        and exists (select 1 from wanted)
      for update of c
    ), held as (
      insert into credit_holds (request_id, target_id, project_id, pool, amount, replay)
      select ${r.requestId}, wanted.target_id, pool.project_id, pool.pool, wanted.amount, ${replay}
      from pool, wanted
      on conflict do nothing
    )`;
}

/** Whether the steps of `reservationSteps` reserved the call: its holds fit, or it lacked none. */
export const reservedOf = (q: Queryable) =>
  q`(exists (select 1 from pool) or not exists (select 1 from wanted))`;

/**
 * Holds the credits of a batch of immediate calls of one pool, each all or none, as
 * `reserveCredits` would one call after another (`fittingCalls`), in one transaction: the pool
 * row locked once, then what the calls' requests hold or were charged already (read under the
 * lock, so a repeat reserved meanwhile is seen), then the fitting calls' holds in one insert.
 * Answers each call's fit, in order.
 */
export function reserveCreditsBatch(sql: Sql, r: BatchReservation): Promise<boolean[]> {
  return sql.begin(async (tx) => {
    const { fits, holding } = await fitCredits(tx, r);
    await holding;
    return fits;
  });
}

/**
 * `reserveCreditsBatch` in the caller's transaction (which a durable accept extends): each
 * call's fit, and the write of the fitting calls' holds, not awaited yet, so that the caller's
 * own write may go beside it in one round trip.
 */
export async function fitCredits(
  tx: Transaction,
  r: BatchReservation,
): Promise<{ fits: boolean[]; holding: PromiseLike<unknown> }> {
  const requestIds = [...new Set(r.calls.map((call) => call.requestId))];
  // Pipelined: one round trip, and the second runs after the first took the pool's lock.
  const [[pool], taken] = await Promise.all([
    tx<{ projectId: string; room: string }[]>`
      select c.project_id, c.balance - c.held as room
      from credit_pools c join projects p on p.id = c.project_id
      where p.slug = ${r.project} and c.pool = ${r.pool}
      for update of c`,
    tx<{ requestId: string; targetId: string }[]>`
      select request_id, target_id from credit_holds where request_id = any(${requestIds}::text[])
      union all
      select request_id, target_id from credit_ledger where request_id = any(${requestIds}::text[])`,
  ]);
  const { fits, holds } = fittingCalls(
    pool ? Number(pool.room) : null,
    r.calls,
    new Set(taken.map((t) => holdKey(t.requestId, t.targetId))),
  );
  const holding =
    pool && holds.length > 0
      ? tx`
        insert into credit_holds (request_id, target_id, project_id, pool, amount)
        select h.request_id, h.target_id, ${pool.projectId}, ${r.pool}, h.amount
        from unnest(${holds.map((h) => h.requestId)}::text[], ${holds.map((h) => h.targetId)}::text[],
          ${holds.map((h) => h.credits)}::bigint[]) as h (request_id, target_id, amount)
        on conflict do nothing`
      : Promise.resolve();
  return { fits, holding };
}

/**
 * Gives back the holds of a request's deliveries that will not be charged: those of `targetIds`
 * (deliveries the edge did not queue after all, a stream that never answered), or all it still
 * has (it settled or was cancelled). A delivery charged already has none left.
 */
export async function releaseHolds(
  q: Queryable,
  requestId: string,
  targetIds?: readonly string[],
): Promise<void> {
  if (targetIds?.length === 0) return;
  await q`
    delete from credit_holds where request_id = ${requestId}
    ${targetIds ? q`and target_id in ${q(targetIds)}` : q``}`;
}

/**
 * Gives back the holds of deliveries that ended unanswered or were settled: each (request,
 * target) pair's, in one statement.
 */
export async function releaseDeliveryHolds(
  q: Queryable,
  deliveries: readonly Pick<Charge, "requestId" | "targetId">[],
): Promise<void> {
  if (deliveries.length === 0) return;
  await q`
    delete from credit_holds h
    using unnest(${deliveries.map((d) => d.requestId)}::text[],
      ${deliveries.map((d) => d.targetId)}::text[]) as d (request_id, target_id)
    where h.request_id = d.request_id and h.target_id = d.target_id`;
}

/** Charges a delivery once, as `chargeDeliveries` charges many. */
export function chargeDelivery(tx: Transaction, charge: Charge): Promise<void> {
  return chargeDeliveries(tx, [charge]);
}

/**
 * Charges deliveries once each (a retry finds its charge there already; a replay is a delivery
 * of its own), in place of their holds; nothing for free-tier live traffic. The charge that
 * empties a pool tells the edges.
 * Runs in the caller's transaction, so attempts' outcomes and their charges commit together;
 * pools are locked in (project, pool) order, so two sets of charges never wait in a circle.
 */
export async function chargeDeliveries(tx: Transaction, charges: readonly Charge[]): Promise<void> {
  const [charged, balances] = await Promise.all([
    ledgerCharges(tx, charges),
    balancesAfter(tx, charges),
  ]);
  await noteEmptiedPools(tx, charged, balances);
}

/** What `ledgerCharges` took from each pool. */
export interface PoolCharge {
  projectId: string;
  pool: KeyMode;
  credits: string;
}

/** The pools' balances, read after the charges before it in the transaction. */
export interface PoolBalance {
  projectId: string;
  pool: KeyMode;
  balance: string;
}

/** `chargeDeliveries`'s first statement: the charges written, the holds they replace gone. */
export async function ledgerCharges(
  tx: Transaction,
  charges: readonly Charge[],
): Promise<PoolCharge[]> {
  if (charges.length === 0) return [];
  const charged = await tx<PoolCharge[]>`
    with released as (
      delete from credit_holds h
      using unnest(${charges.map((c) => c.requestId)}::text[],
        ${charges.map((c) => c.targetId)}::text[], ${charges.map((c) => c.replay ?? 0)}::int[])
        as c (request_id, target_id, replay)
      where h.request_id = c.request_id and h.target_id = c.target_id and h.replay = c.replay
    ), ledgered as (
      insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id, replay)
      select p.id, c.pool, -c.credits, 'delivery', c.request_id, c.target_id, c.replay
      from unnest(${charges.map((c) => c.project)}::text[], ${charges.map((c) => c.pool)}::text[],
        ${charges.map((c) => c.requestId)}::text[], ${charges.map((c) => c.targetId)}::text[],
        ${charges.map((c) => deliveryCredits(c.bytes))}::bigint[],
        ${charges.map((c) => c.replay ?? 0)}::int[])
        as c (project, pool, request_id, target_id, credits, replay)
      join projects p on p.slug = c.project
      where not (p.plan = 'free' and c.pool = 'live')
      order by p.id, c.pool
      on conflict (request_id, target_id, replay) do nothing
      returning project_id, pool, -amount as credits
    )
    select project_id, pool, sum(credits) as credits from ledgered group by project_id, pool`;
  return charged;
}

/**
 * The balances of the charges' pools: sent after `ledgerCharges` in the same transaction, it
 * reads them after the charges. The inserts' trigger (migration 007) moved each pool's balance
 * and holds its row until commit, so this is the balance after every charge before these.
 */
export async function balancesAfter(
  tx: Transaction,
  charges: readonly Charge[],
): Promise<PoolBalance[]> {
  if (charges.length === 0) return [];
  const balances = await tx<PoolBalance[]>`
    select c.project_id, c.pool, c.balance from credit_pools c join projects p on p.id = c.project_id
    where (p.slug, c.pool) in (
      select * from unnest(${charges.map((c) => c.project)}::text[],
        ${charges.map((c) => c.pool)}::text[]))
    order by c.project_id, c.pool`;
  return balances;
}

/**
 * `chargeDeliveries`'s end: a pool that `charged` emptied goes on the change feed. Its lock must
 * be the transaction's last (store/changes.ts).
 */
export async function noteEmptiedPools(
  tx: Transaction,
  charged: readonly PoolCharge[],
  balances: readonly PoolBalance[],
): Promise<void> {
  for (const pool of balances) {
    const credits = Number(
      charged.find((c) => c.projectId === pool.projectId && c.pool === pool.pool)?.credits ?? 0,
    );
    const left = Number(pool.balance);
    if (left <= 0 && left + credits > 0) await recordChange(tx, pool.projectId, "routing");
  }
}
