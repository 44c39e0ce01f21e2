/**
 * Credits as stored: a ledger per project and pool (grants positive, one charge per delivery that
 * reached its target), and each pool's running balance and use beside it (migration 007). A pool
 * emptying or refilling goes on the change feed, so edges refuse calls on an empty metered pool
 * (402) with no control-plane call per request.
 */
import { deliveryCredits, isMetered } from "../core/billing.ts";
import { type KeyMode, keyModes, type Plan } from "../core/model.ts";
import { recordChange } from "./changes.ts";
import type { Queryable, Sql, Transaction } from "./db.ts";

export interface PoolUsage {
  used: number;
  /** Null when the pool is unmetered (free-tier live traffic). */
  remaining: number | null;
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
  const rows = await sql<{ pool: KeyMode; used: string; balance: string }[]>`
    select pool, used, balance from credit_pools where project_id = ${projectId}`;
  const pool = (mode: KeyMode): PoolUsage => {
    const row = rows.find((r) => r.pool === mode);
    return {
      used: Number(row?.used ?? 0),
      remaining: isMetered(plan, mode) ? Number(row?.balance ?? 0) : null,
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
}

/**
 * Charges a delivery once (a retry finds its charge there already); nothing for free-tier live
 * traffic. The charge that empties a pool tells the edges. Runs in the caller's transaction, so
 * an attempt's outcome and its charge commit together.
 */
export async function chargeDelivery(tx: Transaction, charge: Charge): Promise<void> {
  const credits = deliveryCredits(charge.bytes);
  const [charged] = await tx<{ projectId: string }[]>`
    insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
    select p.id, ${charge.pool}, ${-credits}, 'delivery', ${charge.requestId}, ${charge.targetId}
    from projects p where p.slug = ${charge.project}
      and not (p.plan = 'free' and ${charge.pool} = 'live')
    on conflict (request_id, target_id) do nothing
    returning project_id`;
  if (!charged) return;
  // The insert's trigger (migration 007) moved the pool's balance and holds its row until
  // commit, so this is the balance after every charge before this one.
  const [pool] = await tx<{ balance: string }[]>`
    select balance from credit_pools
    where project_id = ${charged.projectId} and pool = ${charge.pool}`;
  const left = Number(pool?.balance ?? 0);
  if (left <= 0 && left + credits > 0) await recordChange(tx, charged.projectId, "routing");
}
