/**
 * Deleting a project: its keys revoked first (edges refuse them before anything else goes), then
 * every row it has, those its tables cascade to and those kept by target, lane or request, and its
 * slug kept so that no new project takes it.
 */
import { recordChange, recordProjectDeleted } from "./changes.ts";
import type { Sql } from "./db.ts";

/** Revokes every key of the project and drops its routing from the edges (the change feed). */
export function retireProject(sql: Sql, projectId: string, now: Date): Promise<void> {
  return sql.begin(async (tx) => {
    const revoked = await tx<{ keyHash: Uint8Array }[]>`
      update api_keys set revoked_at = ${now}, sealed_plaintext = null
      where project_id = ${projectId} and revoked_at is null
      returning key_hash`;
    for (const { keyHash } of revoked) await recordChange(tx, projectId, "key", keyHash);
    await recordChange(tx, projectId, "routing");
  });
}

/** Whether a project of this slug was deleted: the slug stays taken. */
export async function wasDeleted(sql: Sql, slug: string): Promise<boolean> {
  const [row] = await sql`select 1 from deleted_projects where slug = ${slug}`;
  return row !== undefined;
}

/** Deletes every row of the project; false when it was gone already. */
export function deleteProjectRows(
  sql: Sql,
  project: { projectId: string; slug: string },
  now: Date,
): Promise<boolean> {
  const { projectId, slug } = project;
  return sql.begin(async (tx) => {
    const targets = tx`
      select t.id from targets t join endpoints e on e.id = t.endpoint_id
      where e.project_id = ${projectId}`;
    for (const table of [
      "target_circuits",
      "circuit_events",
      "held_deliveries",
      "target_flow",
      "flow_slots",
      "lane_entries",
    ]) {
      await tx`delete from ${tx(table)} where target_id in (${targets})`;
    }
    for (const table of [
      "lane_waits",
      "lane_wait_counts",
      "scheduled_counts",
      "held_counts",
      "accepted_starts",
      "idempotency_keys",
      "held_places",
    ]) {
      await tx`delete from ${tx(table)} where project_id = ${projectId}`;
    }
    await tx`delete from rate_demand where project = ${slug}`;
    await tx`insert into deleted_projects (slug, deleted_at) values (${slug}, ${now})
      on conflict (slug) do nothing`;
    // The rest goes with the project: members, lines, endpoints, keys, requests with their
    // attempts, bodies and callbacks, credits, schedules, recovery jobs.
    const deleted = await tx`delete from projects where id = ${projectId} returning id`;
    await recordProjectDeleted(tx, slug);
    return deleted.length > 0;
  });
}

/** A deleted project's histories are deleted once more this long after its DELETE. */
const SWEEP_AFTER_MS = 60 * 60 * 1000;

/** How long one run sweeps: a deletion may wait for the one before it (a batch job at a time). */
const SWEEP_BUDGET_MS = 30_000;

/**
 * Deletes once more the Temporal histories of the projects deleted at least SWEEP_AFTER_MS ago
 * (by then no workflow of theirs starts another: their rows are gone), each once, the oldest first
 * for SWEEP_BUDGET_MS at most (the daily run's activity has a minute; the rest go next run);
 * answers how many.
 */
export async function sweepDeletedProjects(
  sql: Sql,
  now: Date,
  deleteHistories: (slug: string) => Promise<void>,
): Promise<number> {
  const rows = await sql<{ slug: string }[]>`
    select slug from deleted_projects
    where histories_swept_at is null
      and deleted_at < ${new Date(now.getTime() - SWEEP_AFTER_MS)}
    order by deleted_at limit 100`;
  const until = Date.now() + SWEEP_BUDGET_MS;
  let swept = 0;
  for (const { slug } of rows) {
    if (Date.now() > until) break;
    await deleteHistories(slug);
    swept++;
    await sql`update deleted_projects set histories_swept_at = ${now} where slug = ${slug}`;
  }
  return swept;
}
