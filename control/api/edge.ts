/** What edges ask: a key by hash, and a project's routing state. */

import type { Endpoint, KeyRecord, Plan, RateLimit } from "../../core/model.ts";
import { requireEdge } from "../auth.ts";
import type { Ctx } from "./context.ts";
import type { ProjectView } from "./projects.ts";
import { loadEndpoints } from "./routing.ts";

/** Plan defaults for endpoints without a rate limit of their own. */
export const planRateLimits: Record<Plan, RateLimit> = {
  free: { requestsPerSecond: 10, burst: 20 },
  paid: { requestsPerSecond: 100, burst: 200 },
};

export interface ProjectState {
  project: ProjectView;
  endpoints: Endpoint[];
  defaultRateLimit: RateLimit;
}

/** Unknown project and unknown key give the same null after the same single query. */
export async function resolveKey(
  ctx: Ctx,
  project: string,
  keyHash: Uint8Array,
): Promise<KeyRecord | null> {
  requireEdge(ctx.caller);
  const [key] = await ctx.sql<KeyRecord[]>`
    select k.id, p.slug as project, k.mode, k.expires_at, k.revoked_at,
      exists (select 1 from api_keys s where s.predecessor_id = k.id and s.revoked_at is null
        and (s.expires_at is null or s.expires_at > ${ctx.now()})) as successor_usable
    from api_keys k join projects p on p.id = k.project_id
    where k.key_hash = ${keyHash} and p.slug = ${project}`;
  return key ?? null;
}

export async function projectState(ctx: Ctx, slug: string): Promise<ProjectState | null> {
  requireEdge(ctx.caller);
  const [project] = await ctx.sql<(ProjectView & { id: string })[]>`
    select id, slug, name, plan, created_at from projects where slug = ${slug}`;
  if (!project) return null;
  const { id, ...view } = project;
  return {
    project: view,
    endpoints: await loadEndpoints(ctx.sql, id),
    defaultRateLimit: planRateLimits[view.plan],
  };
}
