/**
 * The front door: `npm start` on a fresh data folder prints a curl that works as printed, and a
 * second start reuses the data and seeds nothing twice.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freeLowPorts, portFree } from "../dev/ports.ts";

const READY = "Ctrl-C stops everything.";
let dataDir = "";
let env: Record<string, string> = {};
let ports: number[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "relay-start-"));
  // Bound only once npm start has its Postgres and Temporal up, seconds later: below the
  // ephemeral range, where no other test's listener or outbound connection takes one meanwhile.
  ports = await freeLowPorts(8);
  const [postgres, temporal, temporalHttp, temporalUi, control, edge, worker, demo] = ports;
  env = {
    RELAY_DATA_DIR: dataDir,
    RELAY_POSTGRES_PORT: String(postgres),
    RELAY_TEMPORAL_PORT: String(temporal),
    RELAY_TEMPORAL_HTTP_PORT: String(temporalHttp),
    RELAY_TEMPORAL_UI_PORT: String(temporalUi),
    RELAY_CONTROL_PORT: String(control),
    RELAY_EDGE_PORT: String(edge),
    RELAY_WORKER_PORT: String(worker),
    RELAY_DEMO_PORT: String(demo),
  };
});

afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Runs `npm start` until it prints its banner; `stop` sends Ctrl-C to its process group. */
async function npmStart() {
  const child: ChildProcess = spawn("npm", ["start"], {
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes(READY)) {
        clearInterval(timer);
        resolve();
      } else if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`npm start exited ${child.exitCode}:\n${output}`));
      }
    }, 100);
  });
  return {
    output: () => output,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(-(child.pid as number), "SIGINT");
      await exited;
    },
  };
}

test("npm start seeds the demo once and its printed curl is delivered", {
  timeout: 240_000,
}, async () => {
  const [, , , temporalUi, , edge] = ports;
  const first = await npmStart();
  try {
    const banner = first.output();
    expect(banner).toContain(`Temporal UI:      http://127.0.0.1:${temporalUi}`);
    expect(banner).toContain(`Codec sign-in:    http://127.0.0.1:${ports[4]}/codec`);
    expect(banner).toMatch(/Owner token: +rmt_/);
    const curl = banner.slice(banner.indexOf("  curl ")).split("\n\n")[0] as string;
    expect(curl).toContain(`http://demo.localhost:${edge}/v1/echo`);

    // Run it exactly as printed, as a user pasting it into a shell would.
    const { stdout } = await promisify(execFile)("bash", ["-c", curl]);
    const { status, requestId } = JSON.parse(stdout) as { status: string; requestId: string };
    expect(status).toBe("queued");
    await expect
      .poll(() => first.output(), { timeout: 30_000 })
      .toMatch(new RegExp(`\\[demo\\] .*delivery received.*${requestId}`));

    // Without RELAY_DEV_CLOCK=1 the dev clock routes do not exist, even for the admin.
    const { adminToken } = JSON.parse(await readFile(join(dataDir, "secrets.json"), "utf8"));
    for (const path of ["/admin/clock", "/admin/rotation/run"]) {
      const answer = await fetch(`http://127.0.0.1:${ports[4]}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}` },
        body: JSON.stringify({ advanceSeconds: 60 }),
      });
      expect(answer.status, path).toBe(404);
    }
  } finally {
    await first.stop();
  }

  const second = await npmStart();
  try {
    expect(second.output()).toContain("The demo project exists already");
    expect(second.output()).not.toMatch(/rk_live_/);
  } finally {
    await second.stop();
  }

  // Ctrl-C stopped every child: nothing is left listening.
  for (const port of ports) expect(await portFree(port), `port ${port}`).toBe(true);
});

/** `npm start` expected to fail: its exit code and everything it printed. */
async function failedStart(extraEnv: Record<string, string>) {
  const run = await promisify(execFile)("node", ["--import", "tsx", "dev/start.ts"], {
    env: { ...process.env, ...env, ...extraEnv },
  }).then(
    () => ({ code: 0, output: "" }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      output: error.stdout + error.stderr,
    }),
  );
  expect(run.code).toBe(1);
  // A message to act on, not a stack trace.
  expect(run.output).not.toMatch(/^\s+at /m);
  return run.output;
}

test("a port in use is named with the variable that moves it", async () => {
  const busy = createServer().listen(0, "127.0.0.1");
  await new Promise((resolve) => busy.once("listening", resolve));
  const { port } = busy.address() as { port: number };
  try {
    const output = await failedStart({ RELAY_EDGE_PORT: String(port) });
    expect(output).toContain(`Port ${port} (edge) is in use`);
    expect(output).toContain("RELAY_EDGE_PORT");
  } finally {
    busy.close();
  }
});

test("no Temporal CLI and no Go: the three ways out, and exit 1", async () => {
  const emptyCache = await mkdtemp(join(tmpdir(), "relay-cache-"));
  try {
    const output = await failedStart({
      PATH: dirname(process.execPath),
      XDG_CACHE_HOME: emptyCache,
      TEMPORAL_CLI: "",
      RELAY_DATA_DIR: join(emptyCache, "data"),
    });
    expect(output).toContain("put the `temporal` binary on PATH");
    expect(output).toContain("set TEMPORAL_ADDRESS");
    expect(output).toContain("install Go");
  } finally {
    await rm(emptyCache, { recursive: true, force: true });
  }
});
