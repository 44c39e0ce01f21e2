/**
 * Per-project caps as stored: each project's overrides of the deployment's defaults, what it
 * uses of each cap, and the check a write that grows a project runs inside its transaction.
 */
import {
  effectiveLimits,
  type LimitOverrides,
  type ProjectCap,
  type ProjectLimits,
  projectCaps,
  requireRoom,
} from "../core/limits.ts";
import { recordChange } from "./changes.ts";
import type { Queryable, Sql } from "./db.ts";

/** What a capped write needs beside its transaction: the deployment's defaults and the time. */
export interface Caps {
  defaults: ProjectLimits;
  /** Keys expired by now no longer count as live. */
  now: Date;
}

export type ProjectUsage = Record<ProjectCap, number>;

/** How much a write adds to each cap it grows (a negative number shrinks it). */
export type Growth = Partial<Record<ProjectCap, number>>;

/**
 * Locks the project's row for the rest of the transaction, then refuses (throws
 * `limit_exceeded`) when `growth` would take the project past one of its caps. Capped writes of
 * one project so take turns from their check to their commit, and two racing at the cap cannot
 * both pass. The lock is `for no key update`: rows that only reference the project (requests,
 * the credit ledger) are not held up by it. `growth` may be read under the lock (what an edit
 * replaces). Call it before the transaction writes anything.
 */
export async function claimRoom(
  tx: Queryable,
  projectId: string,
  caps: Caps,
  growth: Growth | (() => Promise<Growth>),
): Promise<void> {
  const [row] = await tx<{ limits: LimitOverrides }[]>`
    select limits from projects where id = ${projectId} for no key update`;
  const limits = effectiveLimits(caps.defaults, row?.limits ?? {});
  const adding = typeof growth === "function" ? await growth() : growth;
  const used = await projectUsage(tx, projectId, caps.now);
  for (const cap of projectCaps) requireRoom(cap, limits[cap], used[cap], adding[cap] ?? 0);
}

/**
 * As `claimRoom` for one unit of `cap` the transaction has written already (a replay's own row,
 * which must come first: it is what tells concurrent replays of one request apart): locks the
 * project's row, then refuses when the project is past the cap with that unit counted.
 */
export async function requireWithinCap(
  tx: Queryable,
  projectId: string,
  caps: Caps,
  cap: ProjectCap,
): Promise<void> {
  const [row] = await tx<{ limits: LimitOverrides }[]>`
    select limits from projects where id = ${projectId} for no key update`;
  const limit = effectiveLimits(caps.defaults, row?.limits ?? {})[cap];
  const used = (await projectUsage(tx, projectId, caps.now))[cap];
  requireRoom(cap, limit, used - 1, 1);
}

/** What the project uses of each cap, at `now`. */
export async function projectUsage(
  sql: Queryable,
  projectId: string,
  now: Date,
): Promise<ProjectUsage> {
  const [usage] = await sql<ProjectUsage[]>`
    select
      (select count(*)::int from endpoints where project_id = ${projectId}) as endpoints,
      (select coalesce(sum(schema_bytes), 0)::float8 from endpoints
        where project_id = ${projectId}) as schema_bytes,
      (select count(*)::int from lines where project_id = ${projectId}) as lines,
      (select count(*)::int from members where project_id = ${projectId}) as members,
      (select count(*)::int from api_keys where project_id = ${projectId}
        and revoked_at is null and (expires_at is null or expires_at > ${now})) as keys,
      (select count(*)::int from replays_begun b join requests r on r.id = b.request_id
        where b.project_id = ${projectId} and r.status = 'delivering') as replays`;
  return usage as ProjectUsage;
}

/** The project's overrides; undefined when there is no such project. */
export async function limitOverrides(
  sql: Sql,
  projectId: string,
): Promise<LimitOverrides | undefined> {
  const [row] = await sql<{ limits: LimitOverrides }[]>`
    select limits from projects where id = ${projectId}`;
  return row?.limits;
}

/**
 * Replaces the project's overrides (a cap left out is the default again); the edges learn its
 * rate limit from the change feed.
 */
export async function setLimitOverrides(
  sql: Sql,
  projectId: string,
  overrides: LimitOverrides,
): Promise<void> {
  const { rateLimit, ...caps } = overrides;
  const set = {
    ...Object.fromEntries(Object.entries(caps).filter(([, value]) => value != null)),
    ...(rateLimit && { rateLimit: { ...rateLimit } }),
  };
  await sql.begin(async (tx) => {
    await tx`update projects set limits = ${tx.json(set)} where id = ${projectId}`;
    await recordChange(tx, projectId, "routing");
  });
}

/** The schema bytes the endpoint at `line/path` counts now; undefined when there is none. */
export async function endpointSchemaBytes(
  tx: Queryable,
  projectId: string,
  line: string,
  path: string,
): Promise<number | undefined> {
  const [row] = await tx<{ schemaBytes: number }[]>`
    select schema_bytes from endpoints
    where project_id = ${projectId} and line_key = ${line} and path = ${path}`;
  return row?.schemaBytes;
}
