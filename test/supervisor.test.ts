/**
 * `npm start`'s supervision, from outside: a worker killed with `kill -9` is restarted with a
 * log line and what was accepted meanwhile is delivered; while no worker takes tasks the edge's
 * /readyz and metrics say so; repeated crashes stop the whole stack loudly. A stack of its own,
 * so the test can kill its worker.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { portFree } from "../dev/ports.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { freeStackPorts, type Stack, type StackPorts, startStack } from "../dev/stack.ts";
import { api, eventually, targetServer } from "./helpers.ts";

let stack: Stack;
let ports: StackPorts;
let dir: string;
let log: string;
const givenUp: string[] = [];
const sink = await targetServer();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "relay-supervisor-"));
  ports = await freeStackPorts();
  log = join(dir, "stack.log");
  stack = await startStack({
    dir,
    ports,
    output: log,
    // Slow enough to call the edge while the worker is down; the second crash gives up.
    supervise: {
      firstDelayMs: 2000,
      maxCrashes: 2,
      windowMs: 600_000,
      onGiveUp: (reason) => givenUp.push(reason),
    },
  });
}, 180_000);
afterAll(async () => {
  await stack?.stop();
  await sink.close();
  await rm(dir, { recursive: true, force: true });
});

const stackLog = () => readFile(log, "utf8");

async function project() {
  const slug = `sup${Date.now().toString(36)}`;
  const { adminToken } = stack.secrets;
  const created = await api(
    adminToken,
    "POST",
    "/projects",
    { slug, name: slug },
    stack.controlUrl,
  );
  const owner = created.body.ownerToken as string;
  const base = `/projects/${slug}`;
  await api(owner, "POST", `${base}/lines`, { key: "v1" }, stack.controlUrl);
  await api(
    owner,
    "POST",
    `${base}/lines/v1/endpoints`,
    { path: "hook", targets: [{ name: "sink", targetUrl: sink.url }] },
    stack.controlUrl,
  );
  const key = await api(
    owner,
    "POST",
    `${base}/keys`,
    { name: "k", mode: "live" },
    stack.controlUrl,
  );
  return { slug, owner, base, key: key.body.plaintext as string };
}

async function call(p: { slug: string; key: string }, body: string) {
  const answer = await request(`${stack.edgeUrl}/v1/hook`, {
    method: "POST",
    headers: { host: `${p.slug}.localhost:${ports.edge}`, authorization: `Bearer ${p.key}` },
    body,
  });
  return { status: answer.statusCode, json: (await answer.body.json()) as { requestId: string } };
}

async function edgeOps(path: string) {
  const answer = await request(`${stack.edgeUrl}${path}`);
  return { status: answer.statusCode, text: await answer.body.text() };
}

test("kill -9 of the worker: a log line, a restart, and the call accepted meanwhile is delivered", async () => {
  const p = await project();
  const pid = stack.processes.worker.child?.pid as number;
  process.kill(pid, "SIGKILL");
  await eventually(async () =>
    (await stackLog()).includes(
      `[supervisor] worker (pid ${pid}) was killed by SIGKILL; restarting in 2000 ms`,
    ),
  );

  const accepted = await call(p, '{"while":"down"}');
  expect(accepted.status).toBe(202);
  expect(sink.received).toHaveLength(0);

  await eventually(async () =>
    /\[supervisor\] worker restarted \(pid \d+\)/.test(await stackLog()),
  );
  expect(stack.processes.worker.child?.pid).not.toBe(pid);
  await eventually(async () => sink.received.some((r) => r.body === '{"while":"down"}'));
  const logged = await eventually(async () => {
    const found = await api(
      p.owner,
      "GET",
      `${p.base}/requests/${accepted.json.requestId}`,
      undefined,
      stack.controlUrl,
    );
    return found.body.status === "delivered" && found;
  });
  expect(logged.status).toBe(200);
}, 60_000);

test("while no worker takes tasks, the edge's /readyz says degraded naming the worker, a gauge says so, and the panel shows a banner", async () => {
  const p = await project();
  expect((await edgeOps("/readyz")).status).toBe(200);
  expect((await edgeOps("/metrics")).text).toContain("relay_edge_task_queue_worker_missing 0");

  // Stopped on purpose, so not restarted: the call waits in Temporal's task queue.
  await stack.processes.worker.stop();
  try {
    expect((await call(p, '{"queued":true}')).status).toBe(202);
    const degraded = await eventually(async () => {
      const ready = await edgeOps("/readyz");
      return JSON.parse(ready.text).status === "degraded" && ready;
    });
    // Still ready: calls keep queueing, and a load balancer must not pull every edge.
    expect(degraded.status).toBe(200);
    const { checks } = JSON.parse(degraded.text);
    expect(checks.worker).toMatch(/^\d+ workflow tasks waited \d+ s with no worker polling$/);
    expect(checks.temporal).toBe("ok");
    const metrics = (await edgeOps("/metrics")).text;
    expect(metrics).toContain("relay_edge_task_queue_worker_missing 1");
    expect(metrics).toMatch(/relay_edge_task_queue_backlog_age_seconds (1\d|[2-9]\d)/);

    // The panel says it on every project page, from GetProject's delivery_warning.
    const detail = await api(p.owner, "GET", p.base, undefined, stack.controlUrl);
    expect(detail.body.deliveryWarning).toMatch(/tasks waited \d+ s with no worker polling/);
    const browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      headless: true,
      chromiumSandbox: false,
      args: ["--disable-gpu", "--no-first-run"],
    });
    try {
      const page = await browser.newPage({ baseURL: stack.controlUrl });
      await page.goto("/");
      await page.getByLabel("Member token").fill(p.owner);
      await page.getByRole("button", { name: "Sign in" }).click();
      const banner = page.getByRole("alert", { name: "Deliveries are waiting" });
      await banner.waitFor();
      expect(await banner.textContent()).toContain("no worker is taking them");
    } finally {
      await browser.close();
    }
  } finally {
    await stack.processes.worker.start();
  }
  await eventually(async () => JSON.parse((await edgeOps("/readyz")).text).status === "ready");
  await eventually(async () => {
    const detail = await api(p.owner, "GET", p.base, undefined, stack.controlUrl);
    return detail.body.deliveryWarning === "";
  });
  await eventually(async () => sink.received.some((r) => r.body === '{"queued":true}'));
}, 60_000);

test("a second crash within the window gives up: the whole stack stops and says why", async () => {
  const pid = stack.processes.worker.child?.pid as number;
  process.kill(pid, "SIGKILL");
  await eventually(async () => givenUp.length > 0);
  expect(givenUp[0]).toBe("worker was killed by SIGKILL: 2 crashes within 600 s, giving up");
  expect(await stackLog()).toContain(`[supervisor] ${givenUp[0]}`);
  for (const port of [ports.edge, ports.control, ports.worker, ports.demo, ports.postgres]) {
    expect(await portFree(port), `port ${port}`).toBe(true);
  }
}, 60_000);

test("the restart delay doubles with each crash, and the crash limit gives up", async () => {
  const output = join(dir, "crasher.log");
  const reasons: string[] = [];
  // Says it is ready, then exits with code 3 a moment later, every time.
  const crasher = new ManagedProcess(
    {
      name: "crasher",
      entry: "crasher",
      env: {},
      readyLine: "up",
      command: [
        process.execPath,
        "-e",
        "console.log('up'); setTimeout(() => process.exit(3), 100)",
      ],
    },
    logFile(output),
  );
  crasher.supervise({
    firstDelayMs: 50,
    maxDelayMs: 100,
    maxCrashes: 4,
    windowMs: 60_000,
    onGiveUp: (reason) => reasons.push(reason),
  });
  await crasher.start();
  await eventually(async () => (await readFile(output, "utf8")).includes("giving up"));
  const lines = (await readFile(output, "utf8"))
    .split("\n")
    .filter((l) => l.startsWith("[supervisor]"));
  expect(lines.map((l) => l.replace(/pid \d+/, "pid N"))).toEqual([
    "[supervisor] crasher (pid N) exited with code 3; restarting in 50 ms (crash 1 of 4 allowed within 60 s)",
    expect.stringMatching(/^\[supervisor\] crasher restarted/),
    "[supervisor] crasher (pid N) exited with code 3; restarting in 100 ms (crash 2 of 4 allowed within 60 s)",
    expect.stringMatching(/^\[supervisor\] crasher restarted/),
    "[supervisor] crasher (pid N) exited with code 3; restarting in 100 ms (crash 3 of 4 allowed within 60 s)",
    expect.stringMatching(/^\[supervisor\] crasher restarted/),
    "[supervisor] crasher exited with code 3: 4 crashes within 60 s, giving up",
  ]);
  expect(reasons).toEqual(["crasher exited with code 3: 4 crashes within 60 s, giving up"]);
});
