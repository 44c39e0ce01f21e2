/**
 * Group commit (store/group-commit.ts): works that arrive while one commits share the next
 * commit; one that fails is rolled back alone; each caller is answered after its commit.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import { groupCommit } from "../store/group-commit.ts";
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

test("works arriving together share commits, a failing one alone is rolled back, each is answered", async () => {
  const begin = groupCommit(sql);
  const outcomes = await Promise.allSettled(
    Array.from({ length: 20 }, (_, n) =>
      begin(async (tx) => {
        // Work 7 fails after writing: its row must not be there.
        await tx`insert into ${sql(table)} values (${n}, txid_current())`;
        if (n === 7) throw new Error("work 7 fails");
        return n;
      }),
    ),
  );
  expect(outcomes.filter((o) => o.status === "rejected")).toHaveLength(1);
  expect(outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []))).toHaveLength(19);
  const rows = await sql<{ n: number; txid: string }[]>`select n, txid from ${sql(table)}`;
  expect(rows.map((r) => r.n).sort((a, b) => a - b)).toEqual(
    Array.from({ length: 20 }, (_, n) => n).filter((n) => n !== 7),
  );
  // The first went alone; the rest, arrived while it committed, shared the next commit.
  expect(new Set(rows.map((r) => r.txid)).size).toBe(2);
});
