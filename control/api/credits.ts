/** A project's credits over the API: its usage, and the admin's grants. */
import { z } from "zod";
import { keyModes } from "../../core/model.ts";
import { grantCredits, poolUsage, type Usage } from "../../store/credits.ts";
import { requireAdmin } from "../auth.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export const addCreditsBody = z.strictObject({
  pool: z.enum(keyModes),
  amount: z.number().int().min(1).max(1_000_000_000),
});

export async function getUsage(ctx: Ctx, slug: string): Promise<Usage> {
  const access = await projectAccess(ctx, slug);
  return poolUsage(ctx.sql, access.projectId, access.plan);
}

/** Admin only: adds credits to a pool. */
export async function addCredits(ctx: Ctx, slug: string, input: unknown): Promise<Usage> {
  requireAdmin(ctx.caller);
  const access = await projectAccess(ctx, slug);
  const { pool, amount } = parseInput(addCreditsBody, input);
  await ctx.sql.begin((tx) => grantCredits(tx, access.projectId, pool, amount));
  return poolUsage(ctx.sql, access.projectId, access.plan);
}
