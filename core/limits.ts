/**
 * Per-project caps: how far one project may grow (endpoints, their schemas' bytes, lines,
 * members, live keys), so that no tenant's size costs the edges and the control plane what other
 * tenants need. Each cap has a deployment default (control/config.ts) that an admin may override
 * per project; a write that would grow a project past one is refused with `limit_exceeded`.
 */
import { RelayError } from "./errors.ts";
import type { Plan, RateLimit } from "./model.ts";

export const projectCaps = [
  "endpoints",
  "schemaBytes",
  "lines",
  "members",
  "keys",
  "replays",
] as const;

export type ProjectCap = (typeof projectCaps)[number];

export type ProjectLimits = Record<ProjectCap, number>;

/**
 * An admin's overrides: a cap absent (or null) is the deployment's default, a rate limit absent
 * the plan's.
 */
export type LimitOverrides = Partial<Record<ProjectCap, number | null>> & {
  rateLimit?: RateLimit | null;
};

/**
 * Each plan's rate limit over all of one project's endpoints, beside each endpoint's own: a
 * project cannot multiply its rate by adding endpoints (docs/api.md "Rate limits").
 */
export const planProjectRateLimits: Record<Plan, RateLimit> = {
  free: { requestsPerSecond: 100, burst: 200 },
  paid: { requestsPerSecond: 1_000, burst: 2_000 },
};

/** A project's rate limit: an admin's own for it, else its plan's. */
export function projectRateLimit(plan: Plan, overrides: LimitOverrides): RateLimit {
  return overrides.rateLimit ?? planProjectRateLimits[plan];
}

/** The highest a cap may be set (the contracts carry caps as int32). */
export const MAX_PROJECT_CAP = 2_147_483_647;

export const defaultProjectLimits: ProjectLimits = {
  endpoints: 1_000,
  schemaBytes: 4 * 1024 * 1024,
  lines: 100,
  members: 100,
  keys: 1_000,
  replays: 1_000,
};

/** How each cap is named to a caller. */
const capNames: Record<ProjectCap, string> = {
  endpoints: "endpoints per project",
  schemaBytes: "schema bytes per project (the sum of its endpoints' JSON Schemas)",
  lines: "lines per project",
  members: "members per project",
  keys: "live API keys per project (neither revoked nor expired)",
  replays: "replays under way per project (each a workflow until it ends)",
};

export function effectiveLimits(defaults: ProjectLimits, overrides: LimitOverrides): ProjectLimits {
  const limits = { ...defaults };
  for (const cap of projectCaps) limits[cap] = overrides[cap] ?? defaults[cap];
  return limits;
}

/**
 * Refuses a write that adds `adding` to a project already using `used` of a cap of `limit`. A
 * write that grows nothing (`adding` <= 0) always passes, so a project over a cap lowered after
 * the fact can still shrink and edit.
 */
export function requireRoom(cap: ProjectCap, limit: number, used: number, adding: number): void {
  if (adding <= 0 || used + adding <= limit) return;
  throw new RelayError(
    "limit_exceeded",
    `this would take the project past its cap of ${limit} ${capNames[cap]}; remove some, or ask the operator to raise the cap`,
  );
}
