/**
 * The request log's retention: a finished request leaves the log (with its attempts and its
 * stored body) once it is older than the retention. Credits stay in the ledger. Deletes run in
 * batches so a large backlog never holds long locks.
 */
import type { Sql } from "./db.ts";

const BATCH = 5000;

export interface Pruned {
  requests: number;
  bodies: number;
}

export async function pruneRequestLog(sql: Sql, now: Date, retentionMs: number): Promise<Pruned> {
  const cutoff = new Date(now.getTime() - retentionMs);
  const pruned: Pruned = { requests: 0, bodies: 0 };
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
  return pruned;
}
