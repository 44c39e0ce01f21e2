/**
 * Group commit: transactions that arrive while one is committing run together in the next, so
 * many share one commit (one WAL flush) and one turn on the rows they all touch, such as a
 * project's credit pool, whose lock each charge holds until its commit. Charged one transaction
 * each, a busy project's deliveries queue on that lock one flush at a time.
 *
 * Each work runs in a savepoint of its own: one that fails is rolled back alone and its caller
 * told, the others commit. Every caller is answered once the shared commit is done, so no one
 * acts on a write that is not durable. Works run one after another, as one connection runs
 * statements anyway.
 */
import type { Sql, Transaction } from "./db.ts";

/** Runs `work` in a transaction, answering what it answered once that committed. */
export type Begin = <T>(work: (tx: Transaction) => Promise<T>) => Promise<T>;

interface Queued {
  work: (tx: Transaction) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** At most this many works share one commit, so a long queue still commits as it goes. */
const MAX_GROUP = 64;

export function groupCommit(sql: Sql): Begin {
  let queue: Queued[] = [];
  let committing = false;

  async function commitGroups(): Promise<void> {
    committing = true;
    while (queue.length > 0) {
      const group = queue.slice(0, MAX_GROUP);
      queue = queue.slice(MAX_GROUP);
      const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
      try {
        await sql.begin(async (tx) => {
          for (const { work } of group) {
            outcomes.push(
              await tx
                .savepoint((sp) => work(sp))
                .then(
                  (value: unknown) => ({ ok: true as const, value }),
                  (error: unknown) => ({ ok: false as const, error }),
                ),
            );
          }
        });
        group.forEach((queued, i) => {
          const outcome = outcomes[i];
          if (outcome?.ok) queued.resolve(outcome.value);
          else queued.reject(outcome?.error);
        });
      } catch (error) {
        // The commit itself failed: nothing of the group is written.
        for (const queued of group) queued.reject(error);
      }
    }
    committing = false;
  }

  return <T>(work: (tx: Transaction) => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!committing) void commitGroups();
    });
}
