/** Embedded PostgreSQL's address and data dir; dev/postgres-server.ts runs the server itself. */
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export const USER = "relay";
/** Loopback only, so a fixed local password protects nothing worth a secret. */
export const PASSWORD = "relay";
export const DATABASE = "relay";

export function embeddedPostgresUrl(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
}

/** The embedded server's data dir in a stack's folder `dir`. */
export const embeddedPostgresDir = (dir: string) => join(dir, "postgres");

/** The server's pid, from its lock file in the data dir; null when there is none. */
export async function postmasterPid(databaseDir: string): Promise<number | null> {
  const lock = await readFile(join(databaseDir, "postmaster.pid"), "utf8").catch(() => "");
  const pid = Number(lock.split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}
