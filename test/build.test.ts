/**
 * The build (`npm run build`, dev/build.ts): every process runs from dist/ on Node alone, through
 * the one entry `node dist/cli/relay.js <command>`. Built once: a dist/ built from these very
 * sources (as CI's build step leaves it) is reused.
 */
import { execFile } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import proto from "@temporalio/proto";
import { DefaultLogger, Runtime, Worker } from "@temporalio/worker";
import { afterAll, beforeAll, expect, test } from "vitest";
import { PayloadCipher } from "../core/payload-codec.ts";
import { build, distDir, relayBin } from "../dev/build.ts";
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import { connect } from "../store/db.ts";
import {
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  stackEnv,
  stackLog,
  targetServer,
} from "./helpers.ts";

// The replay workers' state changes at INFO would fill the test output.
Runtime.install({ logger: new DefaultLogger("WARN") });

beforeAll(async () => {
  await build();
}, 300_000);

/** `relay args...` from the build with `env` alone (and PATH): its exit code and output. */
function relayCommand(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      [relayBin, ...args],
      { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 60_000 },
      (_error, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

test.each([
  [
    "worker",
    { RELAY_ENCRYPTION_KEY: "zz" },
    "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters",
  ],
  ["control", { RELAY_ADMIN_TOKEN: "short" }, "RELAY_ADMIN_TOKEN must be at least 32 characters"],
  ["edge", { RELAY_CONTROL_URL: "control" }, "RELAY_CONTROL_URL: Invalid URL"],
  [
    "worker",
    { RELAY_WORKER_PORT: "http" },
    "RELAY_WORKER_PORT: Invalid input: expected number, received NaN",
  ],
  ["migrate", { DATABASE_URL: "" }, "DATABASE_URL: Invalid URL"],
] as const)(
  "relay %s from the build refuses a bad setting (%j): exit 1, one line naming it",
  async (command, bad, line) => {
    const { code, stdout, stderr } = await relayCommand([command], { ...stackEnv(), ...bad });
    expect(code).toBe(1);
    expect(stderr).toBe(`relay ${command}: ${line}\n`);
    expect(stdout).toBe("");
  },
);

test("relay from the build names a missing setting, and refuses an unknown command with its usage", async () => {
  const missing = await relayCommand(["worker"], {});
  expect(missing.code).toBe(1);
  expect(missing.stderr).toBe(
    "relay worker: DATABASE_URL is not set\nrelay worker: RELAY_ENCRYPTION_KEY is not set\n",
  );
  const unknown = await relayCommand(["serve"], {});
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('relay: unknown command "serve"');
  expect(unknown.stderr).toContain("migrate");
});

test("relay migrate from the build applies every migration to a new database, then has none to apply", async () => {
  const admin = connect(stack().databaseUrl, { max: 1 });
  const name = `relay_migrate_${Date.now().toString(36)}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${name}`;
  try {
    const migrations = (
      await readdir(fileURLToPath(new URL("../store/migrations", import.meta.url)))
    )
      .filter((file) => file.endsWith(".sql"))
      .sort();
    const first = await relayCommand(["migrate"], { DATABASE_URL: url.href });
    expect(first).toMatchObject({ code: 0, stdout: `applied ${migrations.join(", ")}\n` });
    const again = await relayCommand(["migrate"], { DATABASE_URL: url.href });
    expect(again).toMatchObject({ code: 0, stdout: "the schema is up to date\n" });
  } finally {
    await admin.unsafe(`drop database ${name} with (force)`);
    await admin.end();
  }
});

test("the build's workflow bundles, plain and traced, replay every recorded history", async () => {
  const dir = fileURLToPath(new URL("../workflows/histories/", import.meta.url));
  const histories = await Promise.all(
    (await readdir(dir))
      .filter((file) => file.endsWith(".bin"))
      .map(async (file) => ({
        workflowId: file,
        history: proto.temporal.api.history.v1.History.decode(await readFile(join(dir, file))),
      })),
  );
  expect(histories.length).toBeGreaterThan(0);
  for (const bundle of ["workflow-bundle.js", "workflow-bundle-traced.js"]) {
    const replays = Worker.runReplayHistories(
      {
        workflowBundle: { codePath: join(distDir, "workflows", bundle) },
        // The secret workflows.test.ts records sealed histories with (workflows/replay.test.ts).
        dataConverter: relayDataConverter(await PayloadCipher.fromSecrets(["5e".repeat(32)])),
      },
      histories,
    );
    const failed: string[] = [];
    let replayed = 0;
    for await (const result of replays) {
      replayed++;
      if (result.error) failed.push(`${bundle} ${result.workflowId}: ${result.error.message}`);
    }
    expect(failed).toEqual([]);
    expect(replayed).toBe(histories.length);
  }
}, 120_000);

const [controlPort = 0, workerPort = 0, edgePort = 0] = await freePorts(3);
const built = (command: string, readyLine: string, env: Record<string, string>) =>
  new ManagedProcess(
    {
      name: `${command}-built`,
      command: [process.execPath, relayBin, command],
      readyLine,
      env: { ...stackEnv(), ...env },
    },
    stackLog(),
  );
const processes: ManagedProcess[] = [];
afterAll(async () => {
  await Promise.all(processes.map((managed) => managed.stop()));
});

test("control plane, worker and edge from the build serve: a request through them is delivered", async () => {
  const controlUrl = `http://127.0.0.1:${controlPort}`;
  processes.push(
    built("control", "control plane listening", { RELAY_CONTROL_PORT: String(controlPort) }),
    built("worker", "worker polling", { RELAY_WORKER_PORT: String(workerPort) }),
    built("edge", "edge listening", {
      RELAY_EDGE_PORT: String(edgePort),
      RELAY_CONTROL_URL: controlUrl,
    }),
  );
  for (const managed of processes) await managed.start();
  // Each runs the build's JavaScript on Node itself: no tsx loader anywhere in its command.
  for (const managed of processes) {
    const cmdline = await readFile(`/proc/${managed.child?.pid}/cmdline`, "utf8");
    expect(cmdline.split("\0").filter(Boolean)).toEqual([
      process.execPath,
      relayBin,
      expect.any(String),
    ]);
  }
  const target = await targetServer();
  try {
    const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }], {}, "paid", {
      controlUrl,
      adminToken: stack().adminToken,
    });
    const sent = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"built":true}',
      edge: { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort },
    });
    expect(sent.status).toBe(202);
    const log = await finishedLog(p, sent.json().requestId);
    expect(log.status).toBe("delivered");
    expect(target.received.map((r) => r.body)).toEqual(['{"built":true}']);
  } finally {
    await target.close();
  }
}, 180_000);
