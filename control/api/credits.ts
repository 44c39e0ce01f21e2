/**
 * The credit ledger: grants, one charge per delivery that reached its target, and the usage
 * answer summed from it. A pool emptying or refilling is a change edges follow, so they refuse
 * calls on an empty metered pool (402) with no control-plane call per request.
 */
import { z } from "zod";
import { deliveryCredits, isMetered } from "../../core/billing.ts";
import { type KeyMode, keyModes, type Plan } from "../../core/model.ts";
import { requireAdmin } from "../auth.ts";
import type { Queryable, Sql, Transaction } from "../db/client.ts";
import { recordChange } from "./changes.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export interface PoolUsage {
  used: number;
  /** Null when the pool is unmetered (free-tier live traffic). */
  remaining: number | null;
}

export interface Usage {
  plan: Plan;
  pools: Record<KeyMode, PoolUsage>;
}

const grantSchema = z.strictObject({
  pool: z.enum(keyModes),
  amount: z.number().int().min(1).max(1_000_000_000),
});

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

export async function getUsage(ctx: Ctx, slug: string): Promise<Usage> {
  const access = await projectAccess(ctx, slug);
  return usageOf(ctx.sql, access.projectId, access.plan);
}

/** Admin only: adds credits to a pool. */
export async function addCredits(ctx: Ctx, slug: string, input: unknown): Promise<Usage> {
  requireAdmin(ctx.caller);
  const access = await projectAccess(ctx, slug);
  const { pool, amount } = parseInput(grantSchema, input);
  await ctx.sql.begin((tx) => grantCredits(tx, access.projectId, pool, amount));
  return usageOf(ctx.sql, access.projectId, access.plan);
}

async function usageOf(sql: Sql, projectId: string, plan: Plan): Promise<Usage> {
  const rows = await sql<{ pool: KeyMode; used: string; balance: string }[]>`
    select pool,
      coalesce(-sum(amount) filter (where reason = 'delivery'), 0) as used,
      coalesce(sum(amount), 0) as balance
    from credit_ledger where project_id = ${projectId} group by pool`;
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
  const { pools } = await usageOf(sql, projectId, plan);
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

/** The first key of the advisory locks that serialize each pool's charges (any constant). */
const POOL_LOCK = 7_243_003;

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
  // The pool's charges take turns from here to commit, so each sums every charge before it:
  // under READ COMMITTED two concurrent charges would each miss the other's, and the one that
  // empties the pool could see credits left and never tell the edges.
  await tx`
    select pg_advisory_xact_lock(
      ${POOL_LOCK}::int, hashtext(${charged.projectId} || ${charge.pool}))`;
  const [balance] = await tx<{ balance: string }[]>`
    select coalesce(sum(amount), 0) as balance from credit_ledger
    where project_id = ${charged.projectId} and pool = ${charge.pool}`;
  const left = Number(balance?.balance ?? 0);
  if (left <= 0 && left + credits > 0) await recordChange(tx, charged.projectId, "routing");
}
