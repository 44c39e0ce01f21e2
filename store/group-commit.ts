/**
 * Group commit: writes that arrive while one commits are gathered into the next transaction and
 * written as one set (a statement per kind of write, not per item), so many share one commit
 * (one WAL flush), one turn on the rows they all touch (a project's credit pool, whose lock each
 * charge holds until its commit) and one round trip per statement. Every caller is answered
 * once the shared commit is done, so no one acts on a write that is not durable. A set that
 * fails is written again item by item, so one bad item fails alone and the others commit.
 */
import { grouped } from "../core/grouped.ts";
import { pipelinedTransaction, type Queryable, type Sql, type Transaction } from "./db.ts";

/** Writes `items` in `tx`; answers each one's answer, in order. */
export type WriteSet<Item, Answer> = (tx: Transaction, items: Item[]) => Promise<Answer[]>;

/** A write set that is one statement, atomic on its own: it needs no transaction around it. */
export type WriteStatement<Item, Answer> = (sql: Queryable, items: Item[]) => Promise<Answer[]>;

/** At most this many items share one commit, so a long queue still commits as it goes. */
const MAX_GROUP = 64;

type Outcome<Answer> = { ok: true; value: Answer } | { ok: false; error: unknown };

export function groupCommit<Item, Answer>(
  sql: Sql,
  write: WriteSet<Item, Answer> | { statement: WriteStatement<Item, Answer> },
): (item: Item) => Promise<Answer> {
  // One statement commits on its own: no begin and commit, two round trips fewer; a set of
  // statements has its begin sent with them.
  const written = (items: Item[]) =>
    "statement" in write
      ? write.statement(sql, items)
      : pipelinedTransaction(sql, (tx) => write(tx, items));
  const committed = (items: Item[]): Promise<Outcome<Answer>[]> =>
    written(items).then((answers) => answers.map((value) => ({ ok: true, value })));
  const together = grouped<Item, Outcome<Answer>>({
    maxItems: MAX_GROUP,
    async run(_, items) {
      try {
        return await committed(items);
      } catch (error) {
        if (items.length === 1) return [{ ok: false, error }];
        const outcomes: Outcome<Answer>[] = [];
        for (const item of items) {
          const [outcome] = await committed([item]).catch((failed: unknown) => [
            { ok: false as const, error: failed },
          ]);
          outcomes.push(outcome ?? { ok: false, error: new Error("no answer written") });
        }
        return outcomes;
      }
    },
  });
  return async (item) => {
    const outcome = await together("", item);
    if (outcome.ok) return outcome.value;
    throw outcome.error;
  };
}
