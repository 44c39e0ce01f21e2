import { readdir, readFile } from "node:fs/promises";
import type { Sql } from "./db.ts";

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);
/** Any constant; every process that migrates takes the same lock, so only one applies. */
const MIGRATION_LOCK = 7_243_001;

/** Applies the ordered `NNN_name.sql` files not yet applied, under an advisory lock. */
export async function migrate(sql: Sql): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{3}_.+\.sql$/.test(f)).sort();
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`create table if not exists schema_migrations (
      version text primary key, applied_at timestamptz not null default now())`;
    const applied = new Set(
      (await tx<{ version: string }[]>`select version from schema_migrations`).map(
        (r) => r.version,
      ),
    );
    const pending = files.filter((f) => !applied.has(f));
    for (const file of pending) {
      await tx.unsafe(await readFile(new URL(file, MIGRATIONS_DIR), "utf8"));
      await tx`insert into schema_migrations (version) values (${file})`;
    }
    return pending;
  });
}
