/**
 * Per-project caps: what a project may grow to and what it uses (its members read them), its rate
 * limit over all its endpoints, and an admin's overrides of the defaults for one project.
 */
import { z } from "zod";
import {
  effectiveLimits,
  MAX_PROJECT_CAP,
  type ProjectCap,
  projectCaps,
  projectRateLimit,
} from "../../core/limits.ts";
import type { Plan, RateLimit } from "../../core/model.ts";
import { waitForEdgesToCatchUp } from "../../store/changes.ts";
import type { Caps } from "../../store/limits.ts";
import * as limits from "../../store/limits.ts";
import { requireAdmin } from "../auth.ts";
import { type Ctx, type Deps, projectAccess } from "./context.ts";
import { parseInput, rateLimitBody } from "./validation.ts";

const override = z.number().int().min(0).max(MAX_PROJECT_CAP).nullable().optional();

/**
 * A PUT replaces every override: a cap absent or null is the deployment's default again, a rate
 * limit absent or null the plan's.
 */
export const limitOverridesBody = z.strictObject({
  ...(Object.fromEntries(projectCaps.map((cap) => [cap, override])) as Record<
    ProjectCap,
    typeof override
  >),
  rateLimit: rateLimitBody
    .nullable()
    .optional()
    .describe("Calls per second over all the project's endpoints; null: the plan's default"),
});

export type ProjectLimitsView = Record<ProjectCap, { limit: number; used: number }> & {
  rateLimit: RateLimit;
};

/** What a capped write checks against: the deployment's defaults, at the caller's time. */
export function capsOf(ctx: Pick<Deps, "projectLimits" | "now">): Caps {
  return { defaults: ctx.projectLimits, now: ctx.now() };
}

export async function getLimits(ctx: Ctx, slug: string): Promise<ProjectLimitsView> {
  const access = await projectAccess(ctx, slug);
  return limitsView(ctx, access);
}

export async function setLimits(ctx: Ctx, slug: string, input: unknown) {
  requireAdmin(ctx.caller);
  const access = await projectAccess(ctx, slug, "owner");
  await limits.setLimitOverrides(ctx.sql, access.projectId, parseInput(limitOverridesBody, input));
  // Its rate limit applies at the edges' next call.
  await waitForEdgesToCatchUp(ctx.sql);
  return limitsView(ctx, access);
}

async function limitsView(
  ctx: Ctx,
  project: { projectId: string; plan: Plan },
): Promise<ProjectLimitsView> {
  const overrides = (await limits.limitOverrides(ctx.sql, project.projectId)) ?? {};
  const effective = effectiveLimits(ctx.projectLimits, overrides);
  const used = await limits.projectUsage(ctx.sql, project.projectId, ctx.now());
  return {
    ...(Object.fromEntries(
      projectCaps.map((cap) => [cap, { limit: effective[cap], used: used[cap] }]),
    ) as Record<ProjectCap, { limit: number; used: number }>),
    rateLimit: projectRateLimit(project.plan, overrides),
  };
}
