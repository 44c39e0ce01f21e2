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
 * The nginx baseline, the raw start rate and the tables are in bench/nginx.ts,
 * bench/raw-starts.ts and bench/relay-report.ts.
 * The edge's memory has a bench of its own (bench/memory.ts, `npm run bench:memory`).
 * wrk generates the HTTP load from its own process. Prints a table and writes JSON.
 * Needs nginx and wrk on PATH (it says which packages to install when they are missing).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { asyncBurst, printBurst } from "./burst.ts";
import { completedPerSecond, startCeilingWorker } from "./ceiling-runner.ts";
import { chargeCost } from "./charges.ts";
import { deliveredPerSecond } from "./delivery.ts";
import { benchNodeProxy, benchStack, percentile, requireTools, runBench } from "./harness.ts";
import { keyVerification } from "./key-verification.ts";
import { startNginx } from "./nginx.ts";
import { publishComparison } from "./publish.ts";
import { rawStartRate } from "./raw-starts.ts";
import {
  printDelivery,
  printReport,
  printStream,
  printSync,
  type SyncResults,
} from "./relay-report.ts";
import {
  connections,
  deliveryConcurrency,
  deliverySeconds,
  only,
  seconds,
  streamRuns,
  streamWarmUp,
} from "./relay-settings.ts";
import { wrk } from "./wrk.ts";

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
  const sync: SyncResults = { paths: {}, ceilingPerSecond: 0, bareOneAtATimeP50Ms: 0 };
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
    // Issue 27's yardstick: one bare workflow at a time, start to result, as wrk's one connection.
    sync.bareOneAtATimeP50Ms = (
      await completedPerSecond(client, "oneLocalActivity", 1, seconds)
    ).p50Ms;
  }

  if (only === "sync") {
    printSync(sync);
    return;
  }

  // (a) stream: time to first byte and each chunk's lag behind its writing, the paths in turn.
  const stream = await measureStreams({
    direct: { url: `${direct}/stream`, headers: {} },
    nginx: { url: `${viaNginx}/stream`, headers: {} },
    "bare Node proxy": {
      url: `${(await benchNodeProxy(cleanup, dir, targetPort)).url}/stream`,
      headers: {},
    },
    "edge (stream)": {
      url: `${stack.edgeUrl}/v1/stream`,
      headers: { host: edgeHost, authorization: auth },
    },
  });
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
  const rawStarts = await rawStartRate(stack, slug, targetPort, connections, seconds);

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

/**
 * `streamRuns` streams per path, one path after another in each run, so the machine's drift falls
 * on every path alike: time to first byte, and each chunk's lag behind the time written in it.
 */
async function measureStreams(
  paths: Record<string, { url: string; headers: Record<string, string> }>,
) {
  const names = Object.keys(paths);
  const ttfb = new Map(names.map((name) => [name, [] as number[]]));
  const lag = new Map(names.map((name) => [name, [] as number[]]));
  for (let run = -streamWarmUp; run < streamRuns; run++) {
    for (const [name, { url, headers }] of Object.entries(paths)) {
      const started = wallClock();
      const response = await request(url, { method: "POST", headers });
      let first = true;
      for await (const chunk of response.body) {
        const now = wallClock();
        if (run < 0) continue;
        if (first) ttfb.get(name)?.push(now - started);
        first = false;
        for (const sent of chunk.toString().matchAll(/data: ([\d.]+)/g))
          lag.get(name)?.push(now - Number(sent[1]));
      }
    }
  }
  return Object.fromEntries(
    names.map((name) => {
      const [firsts, lags] = [ttfb.get(name) ?? [], lag.get(name) ?? []];
      const stats = {
        ttfbP50: percentile(firsts, 0.5),
        ttfbP99: percentile(firsts, 0.99),
        chunkP50: percentile(lags, 0.5),
        chunkP99: percentile(lags, 0.99),
      };
      return [name, stats];
    }),
  );
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
