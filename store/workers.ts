/**
 * Worker processes as the log knows them (migration 030): each says every few seconds that it is
 * alive, and names itself on the attempts it starts, so that another worker can tell an attempt
 * still in flight on a live worker from one lost with a dead one.
 */
import type { Sql } from "./db.ts";

/** How often a worker says it is alive. */
export const WORKER_SEEN_EVERY_MS = 2_000;
/**
 * A worker not seen for this long is taken for dead: its attempts without an end are lost. Under
 * a workflow task's timeout (10 s), so a task run again after its worker's kill -9 finds it dead.
 */
export const WORKER_ALIVE_MS = 3 * WORKER_SEEN_EVERY_MS;
/** Workers not seen for this long are forgotten. */
const FORGOTTEN_AFTER = "1 day";

/** This worker is alive now; workers long gone are forgotten. */
export async function seeWorker(sql: Sql, workerId: string): Promise<void> {
  await sql`
    insert into workers (id, seen_at) values (${workerId}, now())
    on conflict (id) do update set seen_at = excluded.seen_at`;
  await sql`delete from workers where seen_at < now() - ${FORGOTTEN_AFTER}::interval`;
}

/** Says the worker is alive every WORKER_SEEN_EVERY_MS until stopped; a failed say is retried next time. */
export function keepSeeing(
  sql: Sql,
  workerId: string,
  logError: (fields: Record<string, unknown>, message: string) => void,
): { stop(): void } {
  const say = () =>
    seeWorker(sql, workerId).catch((err: unknown) => logError({ err }, "the worker's liveness"));
  void say();
  const timer = setInterval(say, WORKER_SEEN_EVERY_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
