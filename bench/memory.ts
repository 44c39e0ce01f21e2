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
 *
 * The load is bench/memory-load.ts; reading the edges' memory, bench/edge-memory.ts.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent } from "undici";
import { freePorts } from "../dev/ports.ts";
import {
  heapSnapshot,
  pidOf,
  rssKb,
  type Sample,
  sample,
  slopePerMinute,
  snapshottedEdge,
} from "./edge-memory.ts";
import { benchStack, percentile, quick, runBench } from "./harness.ts";
import { growthTable, heapGrowth, summarizeHeapSnapshot } from "./heap-diff.ts";
import { type Call, CYCLE, callFor, type Kind, MAX_IN_FLIGHT, steadyLoad } from "./memory-load.ts";

const runSeconds = Number(process.env.BENCH_MEMORY_SECONDS ?? (quick ? 30 : 600));
const warmupSeconds = Number(process.env.BENCH_MEMORY_WARMUP_SECONDS ?? (quick ? 10 : 60));
const rate = Number(process.env.BENCH_MEMORY_RATE ?? 20);
const keepSnapshots = process.env.BENCH_KEEP_SNAPSHOTS === "1";
const TARGET_PERCENT = 5;
const SAMPLE_EVERY_MS = 10_000;
/** After a phase's last answer: the edge's own follow-ups (a stream's record) settle first. */
const SETTLE_MS = 2000;

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
  const load = steadyLoad(rate, send);

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
