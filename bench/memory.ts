/**
 * `npm run bench:memory` (issue 13, target 5): the edge's memory over a steady mixed load, after
 * a warm-up, against a growth of under 5%. A fixed rate rather than wrk's flat-out load, so the
 * machine keeps up and what is measured is the edge's steady state: the rate's default stays
 * under this 2-core machine's delivery ceiling, and the oldest queued task's wait is printed to
 * show the queue did not grow. In every 20 calls: 12 async, 2 sync, 2 stream, and one each of a
 * wrong key, an unknown project, a body that is not JSON and an unknown path, each with a value
 * of its own (key, slug, path), so that what the edge keeps by its callers' input is exercised.
 *
 * Two edges take the load in turn, a cycle each: the stack's, whose RSS is read from /proc
 * every 10 s of the run (growth: the median of the last tenth against the first's), and a twin
 * started with Node's --heapsnapshot-signal, whose heap is snapshotted from outside, with no
 * code of the edge's own: A after the warm-up, B after the run, each with the load paused and
 * drained, so neither holds calls in flight (a snapshot collects garbage first; see
 * `heapSnapshot`). Prints RSS and heap growth against the target and the top growers by
 * constructor and by string shape (bench/heap-diff.ts); writes bench/results/memory.json;
 * exits 1 over the target.
 *
 * BENCH_MEMORY_SECONDS (600; 30 with BENCH_QUICK=1), BENCH_MEMORY_WARMUP_SECONDS (60; 10),
 * BENCH_MEMORY_RATE (calls per second over both edges, 20), BENCH_KEEP_SNAPSHOTS=1 keeps the
 * temporary directory with both snapshots and the logs, and prints where it is.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, Client, request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { logFile, ManagedProcess, waitFor } from "../dev/processes.ts";
import type { Stack } from "../dev/stack.ts";
import { benchStack, percentile, quick, runBench } from "./harness.ts";
import { growthTable, heapGrowth, summarizeHeapSnapshot } from "./heap-diff.ts";

const runSeconds = Number(process.env.BENCH_MEMORY_SECONDS ?? (quick ? 30 : 600));
const warmupSeconds = Number(process.env.BENCH_MEMORY_WARMUP_SECONDS ?? (quick ? 10 : 60));
const rate = Number(process.env.BENCH_MEMORY_RATE ?? 20);
const keepSnapshots = process.env.BENCH_KEEP_SNAPSHOTS === "1";
const TARGET_PERCENT = 5;
const SAMPLE_EVERY_MS = 10_000;
/** Past this many calls unanswered, a due call is skipped (and counted), not queued. */
const MAX_IN_FLIGHT = 256;
/** After a phase's last answer: the edge's own follow-ups (a stream's record) settle first. */
const SETTLE_MS = 2000;

type Kind =
  | "async"
  | "sync"
  | "stream"
  | "wrong key"
  | "unknown project"
  | "bad JSON"
  | "unknown path";

/** One cycle of 20 calls, the bad ones spread between the good. */
const CYCLE: Kind[] = [
  ...["async", "async", "sync", "async", "wrong key"],
  ...["async", "stream", "async", "async", "unknown project"],
  ...["async", "sync", "async", "async", "bad JSON"],
  ...["async", "stream", "async", "async", "unknown path"],
] as Kind[];

interface Outcomes {
  statuses: Record<string, number>;
  ms: number[];
}

const mib = (kb: number) => (kb / 1024).toFixed(1);
const percent = (start: number, end: number) => ((end - start) / start) * 100;

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-memory-"));
  cleanup.add(async () => {
    if (keepSnapshots) console.log(`kept ${dir} (BENCH_KEEP_SNAPSHOTS=1)`);
    else await rm(dir, { recursive: true, force: true });
  });
  const snapshots = join(dir, "snapshots");
  await mkdir(snapshots);
  const { stack, ports, slug, key } = await benchStack(cleanup, dir, {
    // Ten minutes at the default rate are over 10,000 deliveries, a project's default credits:
    // the last calls would be 402s, lighter than the first.
    RELAY_INITIAL_CREDITS: "100000000",
  });
  const [twinPort = 0] = await freePorts(1);
  const twin = snapshottedEdge(stack, twinPort, snapshots, dir);
  cleanup.add(() => twin.stop());
  await twin.start();
  const edges = [
    { url: stack.edgeUrl, domain: `localhost:${ports.edge}`, pid: pidOf(stack.processes.edge) },
    { url: `http://127.0.0.1:${twinPort}`, domain: `localhost:${twinPort}`, pid: pidOf(twin) },
  ] as const;
  const [measured, snapshotted] = edges;

  // A connection for every call in flight: no call waits in this side's queue.
  const dispatcher = new Agent({ connections: MAX_IN_FLIGHT, keepAliveTimeout: 30_000 });
  cleanup.add(() => dispatcher.close());
  const outcomes = new Map<Kind, Outcomes>();
  const calls = edges.map((edge) => callFor(edge.url, edge.domain, slug, key, dispatcher));
  const send = async (n: number) => {
    const kind = CYCLE[n % CYCLE.length] as Kind;
    // Whole cycles to each edge in turn: both get the same mix.
    const call = calls[Math.floor(n / CYCLE.length) % calls.length] as Call;
    const counted = outcomes.get(kind) ?? { statuses: {}, ms: [] };
    outcomes.set(kind, counted);
    const started = performance.now();
    const status = await call(kind, n).catch(() => "error");
    counted.ms.push(performance.now() - started);
    counted.statuses[status] = (counted.statuses[status] ?? 0) + 1;
  };
  const load = steadyLoad(send);

  console.log(`Warm-up: ${warmupSeconds} s at ${rate} calls/s...`);
  await load.drive(warmupSeconds);
  outcomes.clear();
  await sleep(SETTLE_MS);
  const twinRssBefore = await rssKb(snapshotted.pid);
  const snapshotA = await heapSnapshot(snapshotted.pid, snapshots, snapshotted.url);
  const twinRssAfter = await rssKb(snapshotted.pid);

  console.log(`Run: ${runSeconds} s at ${rate} calls/s...`);
  const started = Date.now();
  const samples: Sample[] = [];
  const takeSample = () => {
    const seconds = (Date.now() - started) / 1000;
    void sample(measured.pid, measured.url, seconds).then((s) => samples.push(s));
  };
  takeSample();
  const sampler = setInterval(takeSample, SAMPLE_EVERY_MS);
  cleanup.add(async () => clearInterval(sampler));
  const skippedBefore = load.skipped;
  await load.drive(runSeconds);
  clearInterval(sampler);
  await sleep(SETTLE_MS);
  const snapshotB = await heapSnapshot(snapshotted.pid, snapshots, snapshotted.url);
  console.log("Reading the snapshots...");
  const heapA = await summarizeHeapSnapshot(snapshotA);
  const heapB = await summarizeHeapSnapshot(snapshotB);
  // A window's median at each end, not two readings: RSS swings with each collection's sawtooth
  // by more than the 5% looked for.
  const window = Math.max(3, Math.ceil(samples.length / 10));
  const medianRss = (some: Sample[]) =>
    percentile(
      some.map((s) => s.rssKb),
      0.5,
    );
  const rssStart = medianRss(samples.slice(0, window));
  const rssEnd = medianRss(samples.slice(-window));
  const rssGrowth = percent(rssStart, rssEnd);
  const heapGrowthPercent = percent(heapA.totalBytes, heapB.totalBytes);
  const byKind = Object.fromEntries(
    [...outcomes].map(([kind, o]) => [
      kind,
      {
        calls: o.ms.length,
        statuses: o.statuses,
        p50Ms: percentile(o.ms, 0.5),
        p99Ms: percentile(o.ms, 0.99),
      },
    ]),
  );
  const report = {
    at: new Date(),
    warmupSeconds,
    runSeconds,
    ratePerSecond: rate,
    skipped: load.skipped - skippedBefore,
    load: byKind,
    rss: {
      medianWindowSamples: window,
      startKb: rssStart,
      endKb: rssEnd,
      growthPercent: rssGrowth,
      samples,
      slopeKbPerMinute: slopePerMinute(samples),
      snapshottedEdge: { beforeSnapshotAKb: twinRssBefore, afterSnapshotAKb: twinRssAfter },
    },
    heap: {
      startBytes: heapA.totalBytes,
      endBytes: heapB.totalBytes,
      growthPercent: heapGrowthPercent,
      startNodes: heapA.nodeCount,
      endNodes: heapB.nodeCount,
    },
    targetPercent: TARGET_PERCENT,
    growers: heapGrowth(heapA, heapB).slice(0, 15),
    stringGrowers: heapGrowth(heapA, heapB, "strings").slice(0, 10),
  };

  console.log(
    `\nEdge memory over ${runSeconds} s at ${rate} calls/s, after ${warmupSeconds} s of warm-up\n`,
  );
  console.log("| call | calls | statuses | p50 ms | p99 ms |");
  console.log("|---|---|---|---|---|");
  for (const [kind, o] of Object.entries(byKind)) {
    console.log(
      `| ${kind} | ${o.calls} | ${JSON.stringify(o.statuses)} | ${o.p50Ms.toFixed(2)} | ${o.p99Ms.toFixed(2)} |`,
    );
  }
  console.log(`\nCalls skipped (over ${MAX_IN_FLIGHT} in flight): ${report.skipped}\n`);
  console.log(`| measure | start | end | growth | target |`);
  console.log("|---|---|---|---|---|");
  const verdict = (growth: number) =>
    `under ${TARGET_PERCENT}%: ${growth < TARGET_PERCENT ? "yes" : "NO"}`;
  console.log(
    `| RSS (/proc, median of ${window} samples) | ${mib(rssStart)} MiB | ${mib(rssEnd)} MiB | ${rssGrowth.toFixed(2)}% | ${verdict(rssGrowth)} |`,
  );
  console.log(
    `| heap (snapshot, live) | ${mib(heapA.totalBytes / 1024)} MiB | ${mib(heapB.totalBytes / 1024)} MiB | ${heapGrowthPercent.toFixed(2)}% | ${verdict(heapGrowthPercent)} |`,
  );
  const rssSeen = samples.map((s) => s.rssKb);
  const backlogs = samples.map((s) => s.backlogSeconds ?? Number.NaN);
  console.log(
    `\nRSS every ${SAMPLE_EVERY_MS / 1000} s: min ${mib(Math.min(...rssSeen))} MiB, max ${mib(Math.max(...rssSeen))} MiB, trend ${report.rss.slopeKbPerMinute.toFixed(0)} KiB/min`,
  );
  console.log(
    `Oldest queued task's wait, every ${SAMPLE_EVERY_MS / 1000} s (steady: stays low): ${backlogs.map((b) => b.toFixed(1)).join(" ")} s`,
  );
  console.log(
    `(RSS is the edge never snapshotted: snapshot A took its twin's from ${mib(twinRssBefore)} to ${mib(twinRssAfter)} MiB, freed but kept resident.)`,
  );
  console.log("\nTop 15 growers, snapshot A -> B (self sizes):\n");
  console.log(growthTable(heapA, heapB));
  console.log("\nTop 10 string shapes grown (digits #, long identifiers *):\n");
  console.log(growthTable(heapA, heapB, 10, "strings"));
  await mkdir("bench/results", { recursive: true });
  await writeFile("bench/results/memory.json", JSON.stringify(report, null, 2));
  console.log("\nwrote bench/results/memory.json");
  if (rssGrowth >= TARGET_PERCENT || heapGrowthPercent >= TARGET_PERCENT) process.exitCode = 1;
});

/**
 * A second edge, like the stack's, that writes its heap to `snapshots` on SIGUSR2 (Node's
 * --heapsnapshot-signal: no code of the edge's own). Writing a snapshot leaves hundreds of MiB
 * freed but resident in the process, where later native growth would hide: RSS is read on the
 * stack's edge, never snapshotted, and the heap on this one, under the same load.
 */
function snapshottedEdge(stack: Stack, port: number, snapshots: string, dir: string) {
  return new ManagedProcess(
    {
      name: "edge-snapshotted",
      entry: "edge/main.ts",
      readyLine: "edge listening",
      env: {
        RELAY_EDGE_PORT: String(port),
        RELAY_CONTROL_URL: stack.controlUrl,
        RELAY_EDGE_TOKEN: stack.secrets.edgeToken,
        TEMPORAL_HTTP_ADDRESS: stack.temporal.httpAddress,
        RELAY_ALLOW_PRIVATE_TARGETS: "1",
        NODE_OPTIONS: [
          process.env.NODE_OPTIONS ?? "",
          "--heapsnapshot-signal=SIGUSR2",
          `--diagnostic-dir=${snapshots}`,
        ].join(" "),
      },
    },
    logFile(join(dir, "edge-snapshotted.log")),
  );
}

function pidOf(managed: ManagedProcess): number {
  const pid = managed.child?.pid;
  if (pid === undefined) throw new Error(`${managed.spec.name} has no process`);
  return pid;
}

type Call = ReturnType<typeof callFor>;

/** Answers a call of `kind` (the `n`th) with its status. */
function callFor(edgeUrl: string, domain: string, slug: string, key: string, dispatcher: Agent) {
  /** A well-formed key no one holds, one per call. */
  const strangerKey = (n: number) => `rk_live_${n.toString(36).padStart(43, "0")}`;
  return async (kind: Kind, n: number): Promise<string> => {
    let host = `${slug}.${domain}`;
    let path = `/v1/${kind}`;
    let authorization = `Bearer ${key}`;
    let body = JSON.stringify({ n });
    switch (kind) {
      case "wrong key":
        path = "/v1/async";
        authorization = `Bearer ${strangerKey(n)}`;
        break;
      case "unknown project":
        host = `nope-${n}.${domain}`;
        path = "/v1/async";
        authorization = `Bearer ${strangerKey(n)}`;
        break;
      case "bad JSON":
        path = "/v1/async";
        body = `{"n":${n},`;
        break;
      case "unknown path":
        path = `/v${n}/missing-${n}`;
        break;
    }
    const answer = await request(`${edgeUrl}${path}`, {
      method: "POST",
      dispatcher,
      headers: { host, authorization, "content-type": "application/json" },
      body,
    });
    await answer.body.dump({ limit: Number.POSITIVE_INFINITY });
    return String(answer.statusCode);
  };
}

/** Calls at `rate` per second, on the clock: a slow answer delays no later call. */
function steadyLoad(send: (n: number) => Promise<void>) {
  let n = 0;
  const inFlight = new Set<Promise<void>>();
  const load = {
    skipped: 0,
    /** Sends for `seconds`, then waits for every answer. */
    async drive(seconds: number): Promise<void> {
      const started = performance.now();
      for (let i = 0; i < seconds * rate; i++) {
        const wait = started + (i * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
        if (inFlight.size >= MAX_IN_FLIGHT) {
          load.skipped++;
          continue;
        }
        const sent: Promise<void> = send(n++).finally(() => inFlight.delete(sent));
        inFlight.add(sent);
      }
      await Promise.all(inFlight);
    },
  };
  return load;
}

/**
 * Writes the edge's heap to `dir` (Node's --heapsnapshot-signal) and answers the file. Twice,
 * keeping the second: the first one's collection finds what is garbage, but what a
 * FinalizationRegistry holds for it (undici's fetch keeps each call's signal there) is let go
 * only by callbacks that run after that snapshot.
 */
async function heapSnapshot(pid: number, dir: string, edgeUrl: string): Promise<string> {
  const collecting = await writeSnapshot(pid, dir, edgeUrl);
  await rm(collecting);
  await sleep(1000);
  return writeSnapshot(pid, dir, edgeUrl);
}

async function writeSnapshot(pid: number, dir: string, edgeUrl: string): Promise<string> {
  const before = new Set(await readdir(dir));
  process.kill(pid, "SIGUSR2");
  let file: string | undefined;
  await waitFor(async () => {
    file = (await readdir(dir)).find((f) => f.endsWith(".heapsnapshot") && !before.has(f));
    return file !== undefined;
  }, 120_000);
  // The edge writes it on its event loop, in one go: once it answers again, the file is whole.
  await getText(`${edgeUrl}/healthz`);
  return join(dir, file as string);
}

interface Sample {
  seconds: number;
  rssKb: number;
  /** How long the oldest task in Relay's queue has waited (the edge's gauge): steady or not. */
  backlogSeconds: number | null;
}

async function sample(pid: number, edgeUrl: string, seconds: number): Promise<Sample> {
  const metrics = await getText(`${edgeUrl}/metrics`).catch(() => "");
  const backlog = /^relay_edge_task_queue_backlog_age_seconds (\S+)$/m.exec(metrics)?.[1];
  return {
    seconds: Math.round(seconds),
    rssKb: await rssKb(pid),
    backlogSeconds: backlog === undefined ? null : Number(backlog),
  };
}

/**
 * A GET on a connection of its own: a pooled one left idle while the edge was busy writing a
 * snapshot may be closed by the edge just as it is reused (ECONNRESET).
 */
async function getText(url: string): Promise<string> {
  const { origin, pathname } = new URL(url);
  const client = new Client(origin, { headersTimeout: 300_000 });
  try {
    const answer = await client.request({ method: "GET", path: pathname });
    return await answer.body.text();
  } finally {
    await client.close();
  }
}

async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

/** Least-squares slope of RSS over the run, in KiB a minute: a trend, beside two end points. */
function slopePerMinute(samples: Sample[]): number {
  if (samples.length < 2) return 0;
  const meanT = samples.reduce((sum, s) => sum + s.seconds, 0) / samples.length;
  const meanR = samples.reduce((sum, s) => sum + s.rssKb, 0) / samples.length;
  let covariance = 0;
  let variance = 0;
  for (const s of samples) {
    covariance += (s.seconds - meanT) * (s.rssKb - meanR);
    variance += (s.seconds - meanT) ** 2;
  }
  return (covariance / variance) * 60;
}
