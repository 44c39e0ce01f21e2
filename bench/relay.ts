/**
 * The relay beside its baselines, in one run on this machine:
 * (a) sync and stream through the edge against calling the target directly and against nginx
 *     `proxy_pass` to the same target (added latency p50/p99, throughput; stream time to first
 *     byte and per-chunk lag);
 * (b) async 202s per second against the raw @temporalio/client start rate on the same server;
 * (c) the async hot path while /metrics is scraped every second and every 100 ms, against the
 *     same load before and after without scrapes (the spread of those two shows the noise);
 * (d) key verification on the edge's hot path (bench/key-verification.ts);
 * (e) sustained delivery, 202 to the target's receipt (bench/delivery.ts), against the bare
 *     ceiling on the same Temporal server (bench/ceiling-runner.ts), run before and after it;
 * (f) async calls one at a time, then a burst at a fixed rate (bench/burst.ts);
 * (g) a delivery's charge as its pool's ledger grows (bench/charges.ts);
 * (h) issue 27's load: 32 publishers not waiting for deliveries, delivered/s and CPU per delivery
 *     per process, before and after batching, on two stacks of its own (bench/publish.ts).
 * The edge's memory has a bench of its own (bench/memory.ts, `npm run bench:memory`).
 * wrk generates the HTTP load from its own process. Prints a table and writes JSON.
 * Needs nginx and wrk on PATH (it says which packages to install when they are missing).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { request } from "undici";
import type { DeliveryInput } from "../core/delivery.ts";
import { DELIVERY_WORKFLOW, TASK_QUEUE } from "../core/temporal.ts";
import { freePorts, portFree } from "../dev/ports.ts";
import { stopChild, waitFor } from "../dev/processes.ts";
import { asyncBurst, type BurstResult, printBurst } from "./burst.ts";
import { completedPerSecond, startCeilingWorker } from "./ceiling-runner.ts";
import { chargeCost } from "./charges.ts";
import { type DeliveryResult, deliveredPerSecond } from "./delivery.ts";
import { benchStack, type Cleanup, percentile, quick, requireTools, runBench } from "./harness.ts";
import { keyVerification } from "./key-verification.ts";
import { publishComparison } from "./publish.ts";
import { type WrkResult, wrk } from "./wrk.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? (quick ? 1 : 8));
const streamRuns = Number(process.env.BENCH_STREAM_RUNS ?? (quick ? 5 : 30));
const deliverySeconds = Number(process.env.BENCH_DELIVERY_SECONDS ?? (quick ? 3 : 60));
/** Starters and callers for the sustained-delivery section, as many as the ceiling probe's. */
const deliveryConcurrency = 32;
/** BENCH_ONLY=sync, =stream, =delivery, =burst, =charges or =publish runs that section alone. */
const only = process.env.BENCH_ONLY;
/** Connections for throughput, sustained load and concurrent starts. */
const connections = quick ? 4 : 16;
const wallClock = () => performance.timeOrigin + performance.now();

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  await mkdir("bench/results", { recursive: true });
  if (only === "publish") {
    await publishComparison(cleanup);
    return;
  }
  await requireTools([
    { command: "nginx", debianPackage: "nginx" },
    { command: "wrk", debianPackage: "wrk" },
  ]);
  const { stack, targetPort, slug, key } = await benchStack(cleanup, dir);
  const [nginxPort = 0] = await freePorts(1);
  await startNginx(cleanup, dir, nginxPort, targetPort);
  const edgeHost = `${slug}.localhost`;
  const auth = `Bearer ${key}`;
  const direct = `http://127.0.0.1:${targetPort}`;
  const viaNginx = `http://127.0.0.1:${nginxPort}`;

  // The bare ceiling on the stack's own Temporal server, for (a) sync and (e).
  const ceilingWorker = await startCeilingWorker(cleanup, dir, "ceiling", stack.temporal.address);
  const connection = await Connection.connect({ address: stack.temporal.address });
  cleanup.add(() => connection.close());
  const client = new Client({ connection });
  await completedPerSecond(client, "oneLocalActivity", connections, 1); // warm-up

  // (e) first when run alone; else last, after the other sections' load has drained.
  const sustainedDelivery = async () => {
    const ceiling = () =>
      completedPerSecond(client, "noActivity", deliveryConcurrency, deliverySeconds / 3);
    const relay = (seconds: number) =>
      deliveredPerSecond({
        edgeUrl: stack.edgeUrl,
        path: "/v1/async",
        host: edgeHost,
        auth,
        targetUrl: direct,
        concurrency: deliveryConcurrency,
        seconds,
      });
    await relay(1); // warm-up: the edge's caches, the worker's first tasks
    const before = await ceiling();
    const delivered = await relay(deliverySeconds);
    const after = await ceiling();
    return {
      delivered,
      ceilingPerSecond: (before.perSecond + after.perSecond) / 2,
      ceilingRuns: [before.perSecond, after.perSecond],
    };
  };
  if (only === "charges") {
    await chargeCost(stack, slug);
    return;
  }
  if (only === "delivery") {
    printDelivery(await sustainedDelivery());
    return;
  }
  const burst = () =>
    asyncBurst({ edgeUrl: stack.edgeUrl, host: edgeHost, auth, targetUrl: direct });
  if (only === "burst") {
    printBurst(await burst());
    return;
  }

  // (a) sync: latency at one connection, throughput at sixteen beside the bare ceiling.
  const sync: SyncResults = { paths: {}, ceilingPerSecond: 0 };
  for (const [name, url, host] of only && only !== "sync"
    ? []
    : ([
        ["direct", `${direct}/sync`, undefined],
        ["nginx", `${viaNginx}/sync`, undefined],
        ["edge (sync via Temporal)", `${stack.edgeUrl}/v1/sync`, edgeHost],
      ] as const)) {
    const options = { seconds, ...(host && { host, auth }) };
    sync.paths[name] = {
      latency: await wrk(dir, url, { ...options, connections: 1 }),
      throughput: await wrk(dir, url, { ...options, connections }),
    };
  }
  if (!only || only === "sync") {
    const bare = await completedPerSecond(client, "oneLocalActivity", connections, seconds);
    sync.ceilingPerSecond = bare.perSecond;
  }

  if (only === "sync") {
    printSync(sync);
    return;
  }

  // (a) stream: time to first byte and each chunk's lag behind its writing.
  const stream: Record<
    string,
    { ttfbP50: number; ttfbP99: number; chunkP50: number; chunkP99: number }
  > = {};
  for (const [name, url, host] of [
    ["direct", `${direct}/stream`, undefined],
    ["nginx", `${viaNginx}/stream`, undefined],
    ["edge (stream)", `${stack.edgeUrl}/v1/stream`, edgeHost],
  ] as const) {
    stream[name] = await measureStream(url, host ? { host, authorization: auth } : {});
  }
  if (only === "stream") {
    printStream(stream);
    return;
  }

  // (b) async 202s against raw starts of the same workflow on the same server.
  const edgeAsync = await wrk(dir, `${stack.edgeUrl}/v1/async`, {
    connections,
    seconds,
    host: edgeHost,
    auth,
  });
  const rawStarts = await rawStartRate(
    stack.temporal.address,
    slug,
    targetPort,
    connections,
    seconds,
  );

  // (c) scrapes beside the hot path.
  const asyncLoad = () =>
    wrk(dir, `${stack.edgeUrl}/v1/async`, { connections, seconds, host: edgeHost, auth });
  const scrapedEvery = async (intervalMs: number) => {
    const scraper = scrapeEvery(`${stack.edgeUrl}/metrics`, intervalMs);
    const load = await asyncLoad();
    return { intervalMs, load, scrapes: await scraper.stop() };
  };
  const unscrapedBefore = await asyncLoad();
  const scraped = [await scrapedEvery(1000), await scrapedEvery(100)];
  const unscrapedAfter = await asyncLoad();

  await drained(client);
  const delivery = await sustainedDelivery();
  const asyncBurstResult = await burst();

  const report = {
    at: new Date(),
    seconds,
    sync,
    stream,
    async: { edgeAsync, rawStarts },
    scrape: { unscrapedBefore, scraped, unscrapedAfter },
    delivery,
    burst: asyncBurstResult,
  };
  printReport(report);
  await writeFile("bench/results/relay.json", JSON.stringify(report, null, 2));
  console.log("\nwrote bench/results/relay.json");
  await keyVerification(stack);
  await chargeCost(stack, slug);
  // (h) runs on two stacks of its own, with this one's processes and backlog out of the way.
  await ceilingWorker.stop();
  await stack.stop();
  await publishComparison(cleanup);
});

async function startNginx(
  cleanup: Cleanup,
  dir: string,
  port: number,
  upstreamPort: number,
): Promise<void> {
  const conf = join(dir, "nginx.conf");
  await mkdir(join(dir, "nginx-logs"), { recursive: true });
  await writeFile(
    conf,
    `worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "nginx-logs", "error.log")} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/nginx-body;
  proxy_temp_path ${dir}/nginx-proxy;
  upstream target { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://target;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const child: ChildProcess = spawn("nginx", ["-p", dir, "-c", conf, "-g", "daemon off;"], {
    stdio: "ignore",
  });
  // A spawn that fails (no binary, no permission) is an error to report, not an uncaught event.
  await once(child, "spawn");
  cleanup.add(() => stopChild(child));
  await waitFor(async () => {
    if (child.exitCode !== null)
      throw new Error(`nginx exited (${child.exitCode}); see ${dir}/nginx-logs`);
    return !(await portFree(port));
  }, 10_000);
}

async function measureStream(url: string, headers: Record<string, string>) {
  const ttfb: number[] = [];
  const lag: number[] = [];
  for (let i = 0; i < streamRuns; i++) {
    const started = wallClock();
    const response = await request(url, { method: "POST", headers });
    let first = true;
    for await (const chunk of response.body) {
      const now = wallClock();
      if (first) ttfb.push(now - started);
      first = false;
      for (const sent of chunk.toString().matchAll(/data: ([\d.]+)/g))
        lag.push(now - Number(sent[1]));
    }
  }
  return {
    ttfbP50: percentile(ttfb, 0.5),
    ttfbP99: percentile(ttfb, 0.99),
    chunkP50: percentile(lag, 0.5),
    chunkP99: percentile(lag, 0.99),
  };
}

/** Starts of the edge's own workflow, with the same input size, straight from the SDK client. */
async function rawStartRate(
  address: string,
  project: string,
  targetPort: number,
  concurrency: number,
  durationS: number,
) {
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const input = (requestId: string): DeliveryInput => ({
    requestId,
    project,
    line: "v1",
    endpoint: "async",
    keyMode: "live",
    receivedAt: new Date().toISOString(),
    headers: { "content-type": "application/json" },
    bodyBase64: btoa('{"bench":true}'),
    bodyBytes: 14,
    targets: [
      {
        id: "raw",
        name: "raw",
        targetUrl: `http://127.0.0.1:${targetPort}/sink`,
        deliveryMode: "async",
        timeoutSeconds: 30,
        headers: {},
      },
    ],
  });
  const latencies: number[] = [];
  const deadline = Date.now() + durationS * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        const id = `raw_${process.pid}_${n++}`;
        const t = performance.now();
        await client.workflow.start(DELIVERY_WORKFLOW, {
          taskQueue: TASK_QUEUE,
          workflowId: id,
          args: [input(id)],
        });
        latencies.push(performance.now() - t);
      }
    }),
  );
  await connection.close();
  return {
    startsPerSecond: latencies.length / durationS,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

/**
 * Waits until no workflow runs on the server (the earlier sections' deliveries are done), so the
 * next section measures its own load and not a backlog; says how long that took.
 */
async function drained(client: Client): Promise<void> {
  const started = performance.now();
  for (;;) {
    const { count } = await client.workflow.count("ExecutionStatus = 'Running'");
    if (count === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  console.log(`backlog drained in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** GETs `url` every `intervalMs` until stopped; answers how many scrapes succeeded. */
function scrapeEvery(url: string, intervalMs: number) {
  let running = true;
  let scrapes = 0;
  const loop = (async () => {
    while (running) {
      const response = await request(url);
      await response.body.text();
      if (response.statusCode === 200) scrapes++;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return scrapes;
    },
  };
}

function printReport(r: {
  sync: SyncResults;
  stream: Record<string, { ttfbP50: number; ttfbP99: number; chunkP50: number; chunkP99: number }>;
  async: {
    edgeAsync: WrkResult;
    rawStarts: { startsPerSecond: number; p50Ms: number; p99Ms: number };
  };
  scrape: {
    unscrapedBefore: WrkResult;
    scraped: { intervalMs: number; load: WrkResult; scrapes: number }[];
    unscrapedAfter: WrkResult;
  };
  delivery: SustainedDelivery;
  burst: BurstResult;
}) {
  const f = (n: number) => n.toFixed(2);
  printSync(r.sync);
  printStream(r.stream);
  const { edgeAsync, rawStarts } = r.async;
  console.log(`\n(b) async, ${connections} connections / ${connections} concurrent starts\n`);
  console.log("| path | per second | p50 ms | p99 ms |");
  console.log("|---|---|---|---|");
  console.log(
    `| raw @temporalio/client start | ${Math.round(rawStarts.startsPerSecond)} | ${f(rawStarts.p50Ms)} | ${f(rawStarts.p99Ms)} |`,
  );
  console.log(
    `| edge 202 | ${Math.round(edgeAsync.requestsPerSecond)} | ${f(edgeAsync.p50Ms)} | ${f(edgeAsync.p99Ms)} |`,
  );
  console.log(
    `| ratio | ${f(edgeAsync.requestsPerSecond / rawStarts.startsPerSecond)}x | | ${f(edgeAsync.p99Ms / rawStarts.p99Ms)}x p99 |`,
  );
  const { unscrapedBefore: a1, scraped, unscrapedAfter: a2 } = r.scrape;
  const baseline = {
    requestsPerSecond: (a1.requestsPerSecond + a2.requestsPerSecond) / 2,
    p99Ms: (a1.p99Ms + a2.p99Ms) / 2,
  };
  console.log(`\n(c) async hot path, ${connections} connections, while /metrics is scraped\n`);
  console.log(
    "| run | scrapes | req/s | p50 ms | p99 ms | req/s vs no scrapes | p99 vs no scrapes |",
  );
  console.log("|---|---|---|---|---|---|---|");
  const row = (name: string, run: WrkResult, scrapes: number) =>
    console.log(
      `| ${name} | ${scrapes} | ${Math.round(run.requestsPerSecond)} | ${f(run.p50Ms)} | ${f(run.p99Ms)} | ${f(run.requestsPerSecond / baseline.requestsPerSecond)}x | ${f(run.p99Ms / baseline.p99Ms)}x |`,
    );
  row("no scrapes (before)", a1, 0);
  for (const { intervalMs, load, scrapes } of scraped) row(`every ${intervalMs} ms`, load, scrapes);
  row("no scrapes (after)", a2, 0);
  printDelivery(r.delivery);
  printBurst(r.burst);
}

interface SyncResults {
  paths: Record<string, { latency: WrkResult; throughput: WrkResult }>;
  /** Bare one-local-activity workflows completed per second by as many starters. */
  ceilingPerSecond: number;
}

function printSync({ paths, ceilingPerSecond }: SyncResults) {
  const f = (n: number) => n.toFixed(2);
  const base = paths.direct?.latency as WrkResult;
  console.log(`\n(a) sync, 1 connection for latency, ${connections} for throughput (wrk)\n`);
  console.log(
    `| path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s (c${connections}) | errors |`,
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const [name, { latency, throughput }] of Object.entries(paths)) {
    console.log(
      `| ${name} | ${f(latency.p50Ms)} | ${f(latency.p99Ms)} | ${f(latency.p50Ms - base.p50Ms)} | ${f(latency.p99Ms - base.p99Ms)} | ${Math.round(throughput.requestsPerSecond)} | ${latency.errors + throughput.errors} |`,
    );
  }
  const edge = paths["edge (sync via Temporal)"]?.throughput.requestsPerSecond ?? 0;
  console.log(
    `| bare one-local-activity workflows, ${connections} starters (ceiling) | | | | | ${Math.round(ceilingPerSecond)} | |`,
  );
  console.log(`| ratio (edge / ceiling) | | | | | ${f(edge / ceilingPerSecond)}x | |`);
}

interface SustainedDelivery {
  delivered: DeliveryResult;
  ceilingPerSecond: number;
  ceilingRuns: number[];
}

function printDelivery({ delivered, ceilingPerSecond, ceilingRuns }: SustainedDelivery) {
  const f = (n: number) => n.toFixed(1);
  console.log(
    `\n(e) sustained delivery, ${deliveryConcurrency} callers each waiting for its delivery, ${deliverySeconds} s; bare ceiling with ${deliveryConcurrency} starters on the same Temporal server, before and after\n`,
  );
  console.log(
    "| path | per second | 202 p50 ms | receipt p50 ms | receipt p99 ms | refused | lost |",
  );
  console.log("|---|---|---|---|---|---|---|");
  console.log(
    `| bare workflows, no activity (ceiling) | ${f(ceilingPerSecond)} (${ceilingRuns.map(f).join(" / ")}) | | | | | |`,
  );
  console.log(
    `| relay: 202 to the target's receipt | ${f(delivered.deliveredPerSecond)} | ${f(delivered.acceptedP50Ms)} | ${f(delivered.deliveredP50Ms)} | ${f(delivered.deliveredP99Ms)} | ${delivered.refused} | ${delivered.lost} |`,
  );
  console.log(
    `| ratio (relay / ceiling) | ${(delivered.deliveredPerSecond / ceilingPerSecond).toFixed(2)}x | | | | | |`,
  );
}

function printStream(
  stream: Record<string, { ttfbP50: number; ttfbP99: number; chunkP50: number; chunkP99: number }>,
) {
  const f = (n: number) => n.toFixed(2);
  const direct = stream.direct as { ttfbP50: number; chunkP50: number };
  const nginxAdded = {
    ttfb: (stream.nginx?.ttfbP50 ?? 0) - direct.ttfbP50,
    chunk: (stream.nginx?.chunkP50 ?? 0) - direct.chunkP50,
  };
  console.log(`\n(a) stream, ${streamRuns} streams of 10 chunks each\n`);
  console.log(
    "| path | TTFB p50 ms | TTFB p99 ms | chunk lag p50 ms | chunk lag p99 ms | added TTFB p50 | added chunk p50 | vs nginx's added (TTFB / chunk) |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [name, s] of Object.entries(stream)) {
    const addedTtfb = s.ttfbP50 - direct.ttfbP50;
    const addedChunk = s.chunkP50 - direct.chunkP50;
    console.log(
      `| ${name} | ${f(s.ttfbP50)} | ${f(s.ttfbP99)} | ${f(s.chunkP50)} | ${f(s.chunkP99)} | ${f(addedTtfb)} | ${f(addedChunk)} | ${f(addedTtfb / nginxAdded.ttfb)}x / ${f(addedChunk / nginxAdded.chunk)}x |`,
    );
  }
}
