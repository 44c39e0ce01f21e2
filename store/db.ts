import postgres from "postgres";

/**
 * One pool per process; column names come back camelCase. Only column names: JSON values (a
 * customer's JSON Schema, target headers) keep their keys exactly.
 */
export function connect(url: string, options: { max?: number } = {}) {
  return postgres(url, {
    max: options.max ?? 10,
    transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
    onnotice: () => {},
  });
}

export type Sql = ReturnType<typeof connect>;

export type Transaction = postgres.TransactionSql<Record<string, never>>;

/** The pool or a transaction: what a query helper can run on. */
export type Queryable = Sql | Transaction;

/** Resolves when Postgres answers a trivial query; for readiness and health. */
export async function postgresAnswers(sql: Sql): Promise<void> {
  await sql`select 1`;
}
