/**
 * Per-project caps: what a project may grow to and what it uses (its members read them), and an
 * admin's overrides of the deployment's defaults for one project.
 */
import { z } from "zod";
import {
  effectiveLimits,
  MAX_PROJECT_CAP,
  type ProjectCap,
  projectCaps,
} from "../../core/limits.ts";
import type { Caps } from "../../store/limits.ts";
import * as limits from "../../store/limits.ts";
import { requireAdmin } from "../auth.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

const override = z.number().int().min(0).max(MAX_PROJECT_CAP).nullable().optional();

/** A PUT replaces every override: a cap absent or null is the deployment's default again. */
export const limitOverridesBody = z.strictObject(
  Object.fromEntries(projectCaps.map((cap) => [cap, override])) as Record<
    ProjectCap,
    typeof override
  >,
);

export type ProjectLimitsView = Record<ProjectCap, { limit: number; used: number }>;

/** What a capped write checks against: the deployment's defaults, at the caller's time. */
export function capsOf(ctx: Ctx): Caps {
  return { defaults: ctx.projectLimits, now: ctx.now() };
}

export async function getLimits(ctx: Ctx, slug: string): Promise<ProjectLimitsView> {
  const access = await projectAccess(ctx, slug);
  return limitsView(ctx, access.projectId);
}

export async function setLimits(ctx: Ctx, slug: string, input: unknown) {
  requireAdmin(ctx.caller);
  const access = await projectAccess(ctx, slug, "owner");
  await limits.setLimitOverrides(ctx.sql, access.projectId, parseInput(limitOverridesBody, input));
  return limitsView(ctx, access.projectId);
}

async function limitsView(ctx: Ctx, projectId: string): Promise<ProjectLimitsView> {
  const overrides = (await limits.limitOverrides(ctx.sql, projectId)) ?? {};
  const effective = effectiveLimits(ctx.projectLimits, overrides);
  const used = await limits.projectUsage(ctx.sql, projectId, ctx.now());
  return Object.fromEntries(
    projectCaps.map((cap) => [cap, { limit: effective[cap], used: used[cap] }]),
  ) as ProjectLimitsView;
}
