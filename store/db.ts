import postgres from "postgres";

/**
 * One pool per process; column names come back camelCase. Only column names: JSON values (a
 * customer's JSON Schema, target headers) keep their keys exactly.
 * `onStatement`: told each statement as it is sent (tests that count or explain them).
 */
export function connect(
  url: string,
  options: { max?: number; onStatement?: (statement: string) => void } = {},
) {
  const { onStatement } = options;
  return postgres(url, {
    max: options.max ?? 10,
    transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
    onnotice: () => {},
    ...(onStatement && { debug: (_connection: number, query: string) => onStatement(query) }),
  });
}

export type Sql = ReturnType<typeof connect>;

export type Transaction = postgres.TransactionSql<Record<string, never>>;

/**
 * A transaction whose BEGIN travels with its first statements: postgres.js's `begin` waits for
 * BEGIN's answer before it sends them, a round trip of its own. On a connection held for it,
 * BEGIN is sent and `run`'s statements are pipelined behind it; COMMIT once `run` is done,
 * ROLLBACK when anything failed. Postgres runs them in order as ever: a statement that fails
 * aborts the transaction, and those behind it fail too. `run` may not use savepoints.
 */
export async function pipelinedTransaction<T>(
  sql: Sql,
  run: (tx: Transaction) => Promise<T>,
): Promise<T> {
  const held = await sql.reserve();
  try {
    const begun = held`begin`.execute();
    begun.catch(() => {}); // awaited below; `run` fails too meanwhile
    let result: T;
    try {
      // Its statements run on the held connection only, as a transaction's do.
      result = await run(held as unknown as Transaction);
      await begun;
    } catch (error) {
      await held`rollback`.catch(() => {});
      throw error;
    }
    // A statement `run` did not wait for may have failed: COMMIT then answers ROLLBACK.
    const committed = await held`commit`;
    if (committed.command !== "COMMIT") throw new Error("the transaction was rolled back");
    return result;
  } finally {
    held.release();
  }
}

/** The pool or a transaction: what a query helper can run on. */
export type Queryable = Sql | Transaction;

/** Resolves when Postgres answers a trivial query; for readiness and health. */
export async function postgresAnswers(sql: Sql): Promise<void> {
  await sql`select 1`;
}
