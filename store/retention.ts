/**
 * The request log's retention: a finished request leaves the log (with its attempts and its
 * stored body) once it is older than the retention, and its content (headers, body, answers)
 * once it is older than its project's retention of content. Credits stay in the ledger. Deletes
 * run in batches so a large backlog never holds long locks. The same daily run sweeps what waits for
 * nothing any more: credit holds no delivery will settle, delayed calls past their time, recovery
 * jobs that ended.
 */
import { eraseAgedContent } from "./content-erase.ts";
import type { Sql } from "./db.ts";
import { pruneKeys } from "./idempotency.ts";
import { pruneLaneEntries } from "./lanes.ts";

const BATCH = 5000;

/**
 * A hold this old whose request was never opened (its workflow never started: an edge lost
 * between its reservation and its start) or has ended (a sync call whose start was lost beside
 * async targets, an Idempotency-Key's repeat after its first call ended) waits for nothing.
 */
export const ORPHAN_HOLD_MS = 60 * 60 * 1000;

/** How long an Idempotency-Key claimed in Postgres is remembered at least. */
export const IDEMPOTENCY_KEY_MS = 24 * 60 * 60 * 1000;

export interface Pruned {
  requests: number;
  /** Requests whose content (headers, body, answers) their project's retention erased. */
  content: number;
  bodies: number;
  /** Idempotency-Keys claimed before the cutoff whose request has ended (store/idempotency.ts). */
  idempotencyKeys: number;
  /** Places in ordering lanes left before the cutoff (store/lanes.ts). */
  laneEntries: number;
  /** Recovery jobs that ended before the cutoff (store/recoveries.ts), with their replays' rows. */
  recoveries: number;
  /** Credit holds given back; delayed calls that reached their time, and ended lanes' waits. */
  holds: number;
  scheduled: number;
}

/** The daily run's answer: the log's pruning, and deleted projects swept (./project-erase.ts). */
export type RetentionRun = Pruned & { deletedProjects: number };

export async function pruneRequestLog(sql: Sql, now: Date, retentionMs: number): Promise<Pruned> {
  const cutoff = new Date(now.getTime() - retentionMs);
  const pruned: Pruned = {
    requests: 0,
    content: 0,
    bodies: 0,
    idempotencyKeys: 0,
    laneEntries: 0,
    recoveries: 0,
    holds: 0,
    scheduled: 0,
  };
  for (;;) {
    // Attempts go with their request (on delete cascade).
    const deleted = await sql`
      delete from requests where id in (
        select id from requests
        where received_at < ${cutoff}
          and status in ('delivered', 'partially_failed', 'failed', 'cancelled')
        limit ${BATCH})`;
    pruned.requests += deleted.count;
    if (deleted.count < BATCH) break;
  }
  for (;;) {
    const erased = await eraseAgedContent(sql, now, BATCH);
    pruned.content += erased;
    if (erased < BATCH) break;
  }
  for (;;) {
    // A body outlives its request only when the request was pruned, or was never logged
    // (its workflow never started); either way, past the cutoff nothing needs it.
    const deleted = await sql`
      delete from bodies where request_id in (
        select b.request_id from bodies b
        where b.created_at < ${cutoff}
          and not exists (select 1 from requests r where r.id = b.request_id)
        limit ${BATCH})`;
    pruned.bodies += deleted.count;
    if (deleted.count < BATCH) break;
  }
  // A key is remembered for a day at least, and while its request is under way.
  const keysCutoff = new Date(now.getTime() - IDEMPOTENCY_KEY_MS);
  for (;;) {
    const count = await pruneKeys(sql, keysCutoff, BATCH);
    pruned.idempotencyKeys += count;
    if (count < BATCH) break;
  }
  for (;;) {
    const count = await pruneLaneEntries(sql, cutoff, BATCH);
    pruned.laneEntries += count;
    if (count < BATCH) break;
  }
  pruned.recoveries = (await sql`delete from recoveries where finished_at < ${cutoff}`).count;
  for (;;) {
    // On real time: a hold's age is the database's, whatever the dev clock says.
    const deleted = await sql`
      delete from credit_holds where (request_id, target_id) in (
        select h.request_id, h.target_id from credit_holds h
          left join requests r on r.id = h.request_id
        where h.created_at < now() - make_interval(secs => ${ORPHAN_HOLD_MS / 1000})
          and (r.id is null or r.status in ('delivered', 'partially_failed', 'failed', 'cancelled'))
        limit ${BATCH})`;
    pruned.holds += deleted.count;
    if (deleted.count < BATCH) break;
  }
  pruned.scheduled = (await sql`delete from scheduled_calls where not_before <= ${now}`).count;
  // An ordered request whose workflow ended without leaving its lane (terminated by hand).
  pruned.scheduled += (await sql`delete from lane_waits where joined_at < ${cutoff}`).count;
  return pruned;
}
