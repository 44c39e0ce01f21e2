/**
 * Group commit (store/group-commit.ts): items that arrive while one set commits are written as
 * the next set; one that fails is rolled back alone; each caller is answered after its commit.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Queryable } from "../store/db.ts";
import { connect } from "../store/db.ts";
import { groupCommit, type WriteStatement } from "../store/group-commit.ts";
import { stack } from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 4 });
const table = `group_commit_${Date.now()}`;

beforeAll(async () => {
  await sql`create table ${sql(table)} (n int primary key, txid bigint not null)`;
});
afterAll(async () => {
  await sql`drop table if exists ${sql(table)}`;
  await sql.end();
});

/** Writes items as one set, each row stamped with its transaction; 7 and up to 1,000 never write. */
const writeSet = (calls: number[][]) => async (tx: Queryable, items: number[]) => {
  calls.push(items);
  if (items.includes(7)) throw new Error("item 7 fails");
  await tx`insert into ${sql(table)} select n, txid_current() from unnest(${items}::int[]) as n`;
  return items.map((n) => n * 10);
};

const rowsFrom = async (from: number) =>
  sql<{ n: number; txid: string }[]>`
    select n, txid from ${sql(table)} where n >= ${from} and n < ${from + 100} order by n`;

test("items arriving together are written as one set in one commit, each answered", async () => {
  const calls: number[][] = [];
  const write = groupCommit(sql, writeSet(calls));
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => write(100 + i)));
  expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => (100 + i) * 10));
  // The first went alone; the rest, arrived while it committed, were the next set.
  expect(calls.map((items) => items.length)).toEqual([1, 19]);
  expect(new Set((await rowsFrom(100)).map((r) => r.txid)).size).toBe(2);
});

test.each([
  ["in a transaction", 200, (write: WriteStatement<number, number>) => write],
  [
    "as one statement, which commits on its own",
    300,
    (write: WriteStatement<number, number>) => ({ statement: write }),
  ],
])(
  "a set written %s that fails is written again item by item: the bad item fails alone, the others commit",
  async (_, from, shape) => {
    const calls: number[][] = [];
    const write = groupCommit(sql, shape(writeSet(calls)));
    const items = [from, from + 1, 7, from + 2, from + 3];
    const outcomes = await Promise.allSettled(items.map((n) => write(n)));
    expect(outcomes.map((o) => o.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
    ]);
    const rows = await rowsFrom(from);
    expect(rows.map((r) => r.n)).toEqual([from, from + 1, from + 2, from + 3]);
    expect(new Set(rows.map((r) => r.txid)).size).toBe(4);
    expect(calls).toEqual([
      [from],
      [from + 1, 7, from + 2, from + 3],
      [from + 1],
      [7],
      [from + 2],
      [from + 3],
    ]);
  },
);

test("a set Postgres refuses midway commits nothing of it: its first insert is rolled back, and its connection goes back ready", async () => {
  const calls: number[][] = [];
  // Each item's row, then a statement that fails for 13 once the rows are in.
  const write = groupCommit(sql, async (tx: Queryable, items: number[]) => {
    calls.push(items);
    const [inserted] = await Promise.all([
      tx`insert into ${sql(table)} select n, txid_current() from unnest(${items}::int[]) as n`,
      tx`select 1 / (${items.includes(13) ? 0 : 1})::int`,
    ]);
    return items.map(() => inserted.count);
  });
  const outcomes = await Promise.allSettled([400, 401, 13, 402].map((n) => write(n)));
  expect(outcomes.map((o) => o.status)).toEqual([
    "fulfilled",
    "fulfilled",
    "rejected",
    "fulfilled",
  ]);
  expect((outcomes[2] as PromiseRejectedResult).reason.message).toMatch(/division by zero/);
  // Only the rows of the sets that committed, each alone once its set failed; none for 13.
  expect((await rowsFrom(400)).map((r) => r.n)).toEqual([400, 401, 402]);
  expect((await sql`select 1 from ${sql(table)} where n = 13`).length).toBe(0);
  expect(calls).toEqual([[400], [401, 13, 402], [401], [13], [402]]);
  // The connections went back to the pool (of 4) in a state to take the next transaction.
  const again = await Promise.all(Array.from({ length: 8 }, (_, i) => write(410 + i)));
  expect(again).toHaveLength(8);
});
