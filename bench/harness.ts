/**
 * What every bench shares: the tools it needs, checked before anything starts; everything it
 * started, stopped however it ends (an error, Ctrl-C, SIGTERM); and BENCH_QUICK=1, short runs
 * with fewer connections for a developer's loop.
 */
import { access, constants, readdir, readFile } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import { temporalServerKindFromEnv } from "../dev/temporal-server.ts";

export const quick = process.env.BENCH_QUICK === "1";

/** The value at quantile `q` (0.5 for the median) of `values`; NaN when there are none. */
export const percentile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};

/** A failure the user can fix: printed as its message alone. */
class BenchError extends Error {}

export interface Tool {
  command: string;
  /** The Debian package that installs it. */
  debianPackage: string;
}

async function onPath(command: string): Promise<boolean> {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const found = await access(join(dir, command), constants.X_OK).then(
      () => true,
      () => false,
    );
    if (found) return true;
  }
  return false;
}

/** Fails, naming the packages to install, when any of `tools` is not on PATH. */
export async function requireTools(tools: Tool[]): Promise<void> {
  const missing: Tool[] = [];
  for (const tool of tools) if (!(await onPath(tool.command))) missing.push(tool);
  if (missing.length === 0) return;
  const packages = [...new Set(missing.map((tool) => tool.debianPackage))].join(" ");
  throw new BenchError(
    [
      `The bench needs ${missing.map((tool) => `\`${tool.command}\``).join(" and ")} on PATH. On Debian or Ubuntu:`,
      `  apt-get install -y ${packages}`,
    ].join("\n"),
  );
}

export interface Cleanup {
  /** Runs `stop` when the bench ends, last added first; after an interruption, throws. */
  add(stop: () => Promise<void>): void;
}

/**
 * Runs `main`, then stops what it registered, also on SIGINT/SIGTERM and uncaught errors. The
 * process exits non-zero when the bench failed or was interrupted.
 */
export async function runBench(main: (cleanup: Cleanup) => Promise<void>): Promise<void> {
  const stops: (() => Promise<void>)[] = [];
  let stopping: Promise<void> | undefined;
  const stopAll = () => {
    stopping ??= (async () => {
      // Last added first, including what is added while stopping (see `add`).
      for (let stop = stops.pop(); stop; stop = stops.pop()) {
        await stop().catch((error) => console.error(error));
      }
    })();
    return stopping;
  };
  let interrupted = false;
  const fail = (error: unknown) => {
    // Once interrupted, what fails as its processes stop under it is no news.
    if (interrupted) return;
    console.error(error instanceof BenchError ? error.message : error);
    process.exitCode = 1;
  };
  const exitAfterStopping = (code: number) => () => {
    interrupted = true;
    process.exitCode = code;
    console.error("\nbench interrupted; stopping what it started...");
    void stopAll().then(() => process.exit(code));
  };
  process.once("SIGINT", exitAfterStopping(130));
  process.once("SIGTERM", exitAfterStopping(143));
  process.once("uncaughtException", (error) => {
    fail(error);
    void stopAll().then(() => process.exit(1));
  });
  try {
    await main({
      add: (stop) => {
        stops.push(stop);
        // Interrupted: whatever comes next would start something only to stop it; main ends here.
        if (interrupted) throw new BenchError("interrupted");
      },
    });
  } catch (error) {
    fail(error);
  } finally {
    await stopAll();
  }
}

/**
 * The customer's side (bench/target.ts) in a process of its own, logging into `dir`; `env` may
 * shape its answers (BENCH_CHUNKS, BENCH_CHUNK_MS).
 */
export function benchTarget(
  dir: string,
  port: number,
  env: Record<string, string> = {},
): ManagedProcess {
  return new ManagedProcess(
    {
      name: "target",
      entry: "bench/target.ts",
      readyLine: "bench target listening",
      env: { BENCH_TARGET_PORT: String(port), ...env },
    },
    logFile(join(dir, "target.log")),
  );
}

/**
 * bench/node-proxy.ts in front of the target on `targetPort`, in a process of its own, logging
 * into `dir`: the floor a stream through any Node proxy pays. Its URL, and the process.
 */
export async function benchNodeProxy(cleanup: Cleanup, dir: string, targetPort: number) {
  const [port = 0] = await freePorts(1);
  const proxy = new ManagedProcess(
    {
      name: "node proxy",
      entry: "bench/node-proxy.ts",
      readyLine: "node proxy listening",
      env: {
        BENCH_PROXY_PORT: String(port),
        BENCH_PROXY_TARGET: `http://127.0.0.1:${targetPort}`,
      },
    },
    logFile(join(dir, "node-proxy.log")),
  );
  cleanup.add(() => proxy.stop());
  await proxy.start();
  return { url: `http://127.0.0.1:${port}`, process: proxy };
}

/** A rate limit no bench reaches. */
export const UNLIMITED_RATE = { requestsPerSecond: 1_000_000, burst: 1_000_000 };

/**
 * Lifts a bench project's rate limit over all its endpoints (the admin's override): a bench
 * measures Relay, not the plan's default.
 */
export async function unlimitProject(controlUrl: string, adminToken: string, slug: string) {
  const response = await fetch(`${controlUrl}/projects/${slug}/limits`, {
    method: "PUT",
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ rateLimit: UNLIMITED_RATE }),
  });
  if (!response.ok) throw new Error(`limits of ${slug}: ${await response.text()}`);
}

/** POSTs `body` to the control plane's management API as `token`: its JSON answer, or throws. */
export function managementPost(controlUrl: string) {
  return async (token: string, path: string, body: unknown) => {
    const response = await fetch(`${controlUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${await response.text()}`);
    return (await response.json()) as Record<string, string>;
  };
}

/**
 * A project "bench" with one endpoint per delivery mode (sync, stream, async) on line v1, each
 * to the bench target on `targetPort` with no rate limit, and a live key for it.
 */
export async function setUpProject(controlUrl: string, adminToken: string, targetPort: number) {
  const call = managementPost(controlUrl);
  const slug = "bench";
  const { ownerToken } = await call(adminToken, "/projects", { slug, name: "bench", plan: "paid" });
  const owner = ownerToken as string;
  await unlimitProject(controlUrl, adminToken, slug);
  await call(owner, `/projects/${slug}/lines`, { key: "v1" });
  const unlimited = UNLIMITED_RATE;
  for (const [path, mode] of [
    ["sync", "sync"],
    ["stream", "stream"],
    ["async", "async"],
  ] as const) {
    const targetPath = mode === "async" ? "sink" : mode;
    await call(owner, `/projects/${slug}/lines/v1/endpoints`, {
      path,
      targets: [
        {
          name: mode,
          targetUrl: `http://127.0.0.1:${targetPort}/${targetPath}`,
          deliveryMode: mode,
        },
      ],
      rateLimit: unlimited,
    });
  }
  const { plaintext } = await call(owner, `/projects/${slug}/keys`, {
    name: "bench",
    mode: "live",
  });
  return { slug, key: plaintext as string };
}

/**
 * Tells `onReceipt` the request id of every delivery the bench target (bench/target.ts) takes
 * from now on, read off its GET /receipts stream, until `stop`.
 */
export async function followReceipts(
  targetUrl: string,
  onReceipt: (requestId: string) => void,
): Promise<{ stop(): Promise<void> }> {
  const stream = await request(`${targetUrl}/receipts`, { bodyTimeout: 0 });
  const reading = (async () => {
    let buffered = "";
    for await (const chunk of stream.body) {
      buffered += chunk.toString();
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const id of lines) onReceipt(id);
    }
  })().catch(() => {});
  return {
    async stop() {
      stream.body.destroy();
      await reading;
    },
  };
}

/**
 * A stack in `dir` (settings `env` added), the bench target beside it (its settings
 * `targetEnv`) and the bench project (setUpProject) on it; `cleanup` stops both, also when the
 * bench is interrupted mid-start.
 */
export async function benchStack(
  cleanup: Cleanup,
  dir: string,
  env: Record<string, string> = {},
  targetEnv: Record<string, string> = {},
) {
  const ports = await freeStackPorts();
  // Credits enough for any run here: a project starts with 10,000, which issue 27's load spends
  // in 16 s (its last calls would be 402s).
  const starting = startStack({
    dir,
    ports,
    output: join(dir, "stack.log"),
    env: { RELAY_INITIAL_CREDITS: "100000000", ...env },
    // RELAY_TEMPORAL_SERVER=postgres: Temporal's own server on PostgreSQL, as in production.
    temporalServer: temporalServerKindFromEnv(),
  });
  cleanup.add(async () => (await starting.catch(() => null))?.stop());
  const stack = await starting;
  const [targetPort = 0] = await freePorts(1);
  const target = benchTarget(dir, targetPort, targetEnv);
  cleanup.add(() => target.stop());
  await target.start();
  const project = await setUpProject(stack.controlUrl, stack.secrets.adminToken, targetPort);
  return { stack, ports, targetPort, ...project };
}

/** What a Relay process started beside `stack` needs to share its Postgres, Temporal and secrets. */
export const stackEnv = (stack: Stack) => ({
  DATABASE_URL: stack.databaseUrl,
  TEMPORAL_ADDRESS: stack.temporal.address,
  TEMPORAL_HTTP_ADDRESS: stack.temporal.httpAddress,
  RELAY_ADMIN_TOKEN: stack.secrets.adminToken,
  RELAY_EDGE_TOKEN: stack.secrets.edgeToken,
  RELAY_ENCRYPTION_KEY: stack.secrets.encryptionKey,
});

/**
 * CPU time (user + system) one of the stack's processes has used so far, in ms, from Linux's
 * /proc (clock ticks of 10 ms); NaN when it is not running.
 */
export const processCpuMs = (stack: Stack, name: "control" | "worker" | "edge") =>
  cpuMs(stack.processes[name]);

/** The same for any process this bench started (Linux's /proc, ticks of 10 ms). */
export async function cpuMs(process: ManagedProcess): Promise<number> {
  const pid = process.child?.pid;
  if (pid === undefined) return Number.NaN;
  const fields = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * CPU time (ms) used so far by each of `roots` (a name to a pid) and every process under it,
 * from one scan of Linux's /proc: each process's own time and its reaped children's (stat
 * fields 14-17), so a child that exited since (a Postgres backend) still counts, in its parent.
 * NaN for a root that is null or not running.
 */
export async function treeCpuMs(
  roots: Record<string, number | null>,
): Promise<Record<string, number>> {
  const stats = new Map<number, { ppid: number; ms: number }>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // After the command's closing parenthesis: state, ppid, ... utime (14) to cstime (17).
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    if (fields.length < 15) continue;
    const ticks = fields.slice(11, 15).reduce((sum, field) => sum + Number(field), 0);
    stats.set(Number(entry), { ppid: Number(fields[1]), ms: ticks * 10 });
  }
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of stats) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const treeMs = (pid: number): number =>
    (stats.get(pid)?.ms ?? 0) +
    (children.get(pid) ?? []).reduce((sum, child) => sum + treeMs(child), 0);
  return Object.fromEntries(
    Object.entries(roots).map(([name, pid]) => [
      name,
      pid !== null && stats.has(pid) ? treeMs(pid) : Number.NaN,
    ]),
  );
}
