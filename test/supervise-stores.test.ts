/**
 * `npm start` supervises Temporal's dev server and embedded Postgres like Relay's own processes:
 * after a `kill -9` of either, it comes back (on the same SQLite file, data dir and ports), every
 * process's /readyz says not ready while it is gone and ready again after, and the requests
 * accepted around the outage are delivered. A stack of its own, started as npm start starts it.
 */
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freeStackPorts, type Stack, type StackPorts, startStack } from "../dev/stack.ts";
import { eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

let stack: Stack;
let ports: StackPorts;
let dir: string;
const givenUp: string[] = [];
const sink = await targetServer();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "relay-stores-"));
  ports = await freeStackPorts();
  stack = await startStack({
    dir,
    ports,
    output: join(dir, "stack.log"),
    // As npm start supervises, with a first restart slow enough to see each outage from outside.
    supervise: { firstDelayMs: 5000, onGiveUp: (reason) => givenUp.push(reason) },
  });
}, 180_000);
afterAll(async () => {
  await stack?.stop();
  await sink.close();
  if (!process.env.RELAY_KEEP_TEST_DIR) await rm(dir, { recursive: true, force: true });
});

/**
 * The pid of the process whose command line (or, with `environ`, environment) mentions
 * `needle` (the stack's own folder) and whose command line mentions `command`.
 */
async function pidOf(needle: string, command = "", file = "cmdline"): Promise<number> {
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const read = (name: string) => readFile(`/proc/${entry}/${name}`, "utf8").catch(() => "");
    const [cmdline, searched] = [await read("cmdline"), await read(file)];
    if (cmdline.includes(command) && searched.split("\0").some((arg) => arg.includes(needle))) {
      return Number(entry);
    }
  }
  throw new Error(`no process mentions ${needle}`);
}

const temporalPid = () => pidOf(join(dir, "temporal.sqlite"));
/** The Node process that runs embedded Postgres for this stack. */
const postgresRunnerPid = () =>
  pidOf(`RELAY_POSTGRES_DIR=${dir}`, "dev/postgres-server.ts", "environ");
/** The postmaster itself (the first line of its lock file), not what started it. */
const postgresPid = async () =>
  Number((await readFile(join(dir, "postgres", "postmaster.pid"), "utf8")).split("\n")[0]);

const readyz = {
  control: () => `${stack.controlUrl}/readyz`,
  edge: () => `${stack.edgeUrl}/readyz`,
  worker: () => `http://127.0.0.1:${ports.worker}/readyz`,
};
type Watched = keyof typeof readyz;

/**
 * Polls every process's /readyz until stopped; answers each one's statuses, repeats folded (a
 * not-ready one with its answer, so a failure says why).
 */
function watchReadiness() {
  const seen: Record<Watched, string[]> = { control: [], edge: [], worker: [] };
  let watching = true;
  const loops = (Object.keys(readyz) as Watched[]).map(async (name) => {
    while (watching) {
      const status = await request(readyz[name](), { headersTimeout: 5000 })
        .then(async (r) =>
          r.statusCode === 200 ? "200" : `${r.statusCode} ${await r.body.text()}`,
        )
        .catch(() => "no answer");
      if (seen[name].at(-1) !== status) seen[name].push(status);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
  return async () => {
    watching = false;
    await Promise.all(loops);
    return seen;
  };
}

/** Each of `names` said not ready at some point (ready before and after: `allReady`). */
function wentDown(seen: Record<Watched, string[]>, names: Watched[]) {
  for (const name of names) {
    const told = `${name}: ${seen[name].join(" | ")}`;
    expect(
      seen[name].some((status) => status !== "200"),
      told,
    ).toBe(true);
  }
}

const project = () =>
  projectWithEndpoint([{ name: "sink", targetUrl: sink.url }], {}, "paid", {
    controlUrl: stack.controlUrl,
    adminToken: stack.secrets.adminToken,
  });

async function call(
  p: { slug: string; key: string },
  body: string,
  headers: Record<string, string> = {},
) {
  const edge = { edgeUrl: stack.edgeUrl, edgePort: ports.edge };
  return (await relay(p.slug, "/v1/hook", { key: p.key, body, headers, edge })).status;
}

/** The edge's key lookups answered from its cache so far. */
async function keyCacheHits(): Promise<number> {
  const metrics = await (await request(`${stack.edgeUrl}/metrics`)).body.text();
  return Number(/relay_edge_key_lookups_total\{cache="hit"\} (\d+)/.exec(metrics)?.[1] ?? 0);
}

const allReady = async () => {
  for (const url of Object.values(readyz)) {
    const r = await request(url()).catch(() => null);
    await r?.body.dump();
    if (r?.statusCode !== 200) return false;
  }
  return true;
};
const delivered = (body: string) => sink.received.some((r) => r.body === body);

test("kill -9 of the Temporal dev server: it comes back, /readyz goes not ready then ready, and what was accepted is delivered", async () => {
  const p = await project();
  expect(await call(p, '{"warm":1}')).toBe(202);
  await eventually(async () => delivered('{"warm":1}'));
  expect(await allReady()).toBe(true);

  // Accepted just before the kill and due a moment after it.
  const before = Array.from({ length: 5 }, (_, i) => `{"before":${i}}`);
  for (const body of before) expect(await call(p, body, { "Relay-Delay": "3s" })).toBe(202);
  const stopWatching = watchReadiness();
  const pid = await temporalPid();
  process.kill(pid, "SIGKILL");
  // Calls during the outage are refused (503) or accepted; every one accepted is delivered.
  const during: string[] = [];
  for (let i = 0; i < 20; i++) {
    const body = `{"during":${i}}`;
    if ((await call(p, body)) === 202) during.push(body);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await eventually(async () => (await temporalPid().catch(() => pid)) !== pid, 120_000);
  await eventually(allReady, 120_000);
  const seen = await stopWatching();
  wentDown(seen, ["control", "edge", "worker"]);
  for (const body of [...before, ...during]) await eventually(async () => delivered(body), 120_000);
  expect(givenUp).toEqual([]);
}, 300_000);

test("kill -9 of embedded Postgres: it comes back on its data dir, /readyz goes not ready then ready, and calls accepted meanwhile are delivered", async () => {
  const p = await project();
  expect(await call(p, '{"warm":2}')).toBe(202);
  await eventually(async () => delivered('{"warm":2}'));
  await eventually(allReady, 60_000);
  // The edge serves the key from its cache: a lookup that raced the key's own change (its mint)
  // is not cached, so call until one is answered from the cache.
  await eventually(async () => {
    const hits = await keyCacheHits();
    expect(await call(p, '{"warm":3}')).toBe(202);
    return (await keyCacheHits()) > hits;
  });

  const stopWatching = watchReadiness();
  const pid = await postgresPid();
  process.kill(pid, "SIGKILL");
  // The edge needs no Postgres: it keeps accepting, and Temporal holds the deliveries.
  const during: string[] = [];
  for (let i = 0; i < 10; i++) {
    const body = `{"pgdown":${i}}`;
    if ((await call(p, body)) === 202) during.push(body);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  expect(during.length).toBeGreaterThan(0);
  await eventually(async () => (await postgresPid().catch(() => pid)) !== pid, 120_000);
  await eventually(allReady, 120_000);
  const seen = await stopWatching();
  wentDown(seen, ["control", "worker"]);
  for (const body of during) await eventually(async () => delivered(body), 180_000);
  // The same project, endpoint and key: the data dir was reused.
  expect(await call(p, '{"after":1}')).toBe(202);
  await eventually(async () => delivered('{"after":1}'), 60_000);
  expect(givenUp).toEqual([]);
}, 400_000);

test("kill -9 of Postgres's runner: the server it left running is stopped, and a new one serves the same data", async () => {
  const p = await project();
  await eventually(allReady, 60_000);
  const [runner, server] = [await postgresRunnerPid(), await postgresPid()];
  process.kill(runner, "SIGKILL");
  await eventually(async () => (await postgresPid().catch(() => server)) !== server, 120_000);
  await eventually(allReady, 120_000);
  expect(await readFile(join(dir, "stack.log"), "utf8")).toContain(
    `"msg":"stopping a postgres left running","pid":${server}`,
  );
  expect(await call(p, '{"runner":1}')).toBe(202);
  await eventually(async () => delivered('{"runner":1}'), 60_000);
  expect(givenUp).toEqual([]);
}, 300_000);
