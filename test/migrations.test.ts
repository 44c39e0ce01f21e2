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

test("a statement of many ledger rows and holds moves each pool by its sum, deletes too", async () => {
  await migrate(db);
  await db`insert into projects (id, slug, name, plan) values
    ('prj_c', 'c', 'c', 'paid'), ('prj_d', 'd', 'd', 'paid')`;
  await db`insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
    values ('prj_c', 'live', 50, 'grant', null, null), ('prj_c', 'live', -2, 'delivery', 'c1', 't'),
      ('prj_c', 'live', -3, 'delivery', 'c2', 't'), ('prj_c', 'test', 9, 'grant', null, null),
      ('prj_d', 'live', 4, 'grant', null, null)`;
  await db`insert into credit_holds (request_id, target_id, project_id, pool, amount)
    values ('c3', 't', 'prj_c', 'live', 1), ('c3', 'u', 'prj_c', 'live', 2),
      ('c4', 't', 'prj_c', 'test', 3), ('d1', 't', 'prj_d', 'live', 4)`;
  await db`delete from credit_holds where target_id = 't'`;
  const pools = () =>
    db<{ projectId: string; pool: string; balance: string; used: string; held: string }[]>`
      select project_id, pool, balance, used, held from credit_pools
      where project_id in ('prj_c', 'prj_d') order by project_id, pool`;
  expect(await pools()).toEqual([
    { projectId: "prj_c", pool: "live", balance: "45", used: "5", held: "2" },
    { projectId: "prj_c", pool: "test", balance: "9", used: "0", held: "0" },
    { projectId: "prj_d", pool: "live", balance: "4", used: "0", held: "0" },
  ]);
  // A project's deletion takes its holds with it: the cascade's statement finds no pool left.
  await db`delete from projects where id = 'prj_c'`;
  expect(await pools()).toEqual([
    { projectId: "prj_d", pool: "live", balance: "4", used: "0", held: "0" },
  ]);
});
