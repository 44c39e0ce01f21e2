/**
 * Migrations on a database that already has data: what a later migration derives from earlier
 * tables must match them when it lands, and stay in step after.
 */
import { readdir, readFile } from "node:fs/promises";
import { afterAll, expect, test } from "vitest";
import { chargeDelivery } from "../store/credits.ts";
import { connect } from "../store/db.ts";
import { migrate } from "../store/migrate.ts";
import { stack } from "./helpers.ts";

const migrations = new URL("../store/migrations/", import.meta.url);
const server = connect(stack().databaseUrl, { max: 1 });
const name = `relay_migrations_${process.pid}`;
await server.unsafe(`drop database if exists ${name}`);
await server.unsafe(`create database ${name}`);
const url = new URL(stack().databaseUrl);
url.pathname = `/${name}`;
const db = connect(url.toString(), { max: 2 });
afterAll(async () => {
  await db.end();
  await server.unsafe(`drop database if exists ${name}`);
  await server.end();
});

/** Applies the migrations numbered below `version` by hand, as an older Relay did. */
async function migrateBelow(version: string) {
  await db`create table schema_migrations (
    version text primary key, applied_at timestamptz not null default now())`;
  for (const file of (await readdir(migrations)).sort()) {
    if (!/^\d{3}_.+\.sql$/.test(file) || file >= version) continue;
    await db.unsafe(await readFile(new URL(file, migrations), "utf8"));
    await db`insert into schema_migrations (version) values (${file})`;
  }
}

test("a ledger written before pools kept their balance is carried into them, then kept in step", async () => {
  await migrateBelow("007");
  await db`insert into projects (id, slug, name, plan) values
    ('prj_a', 'a', 'a', 'paid'), ('prj_b', 'b', 'b', 'paid')`;
  await db`insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
    values ('prj_a', 'live', 100, 'grant', null, null), ('prj_a', 'live', -3, 'delivery', 'r1', 't'),
      ('prj_a', 'live', -2, 'delivery', 'r2', 't'), ('prj_a', 'test', 10, 'grant', null, null),
      ('prj_b', 'live', 1, 'grant', null, null), ('prj_b', 'live', -4, 'delivery', 'r3', 't')`;

  expect(await migrate(db)).toContain("007_credit_pools.sql");
  const pools = () =>
    db<{ projectId: string; pool: string; balance: string; used: string }[]>`
      select project_id, pool, balance, used from credit_pools order by project_id, pool`;
  expect(await pools()).toEqual([
    { projectId: "prj_a", pool: "live", balance: "95", used: "5" },
    { projectId: "prj_a", pool: "test", balance: "10", used: "0" },
    { projectId: "prj_b", pool: "live", balance: "-3", used: "4" },
  ]);

  await db.begin((tx) =>
    chargeDelivery(tx, { project: "b", pool: "test", requestId: "r4", targetId: "t", bytes: 1 }),
  );
  await db`insert into credit_ledger (project_id, pool, amount, reason) values ('prj_a', 'live', 7, 'grant')`;
  expect(await pools()).toEqual([
    { projectId: "prj_a", pool: "live", balance: "102", used: "5" },
    { projectId: "prj_a", pool: "test", balance: "10", used: "0" },
    { projectId: "prj_b", pool: "live", balance: "-3", used: "4" },
    { projectId: "prj_b", pool: "test", balance: "-1", used: "1" },
  ]);
});
