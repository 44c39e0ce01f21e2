/**
 * Section (h) of bench/relay.ts, issue 27's measurement (`BENCH_ONLY=publish` runs it alone): the
 * peer's load shape, 32 publishers for BENCH_PUBLISH_SECONDS (20 s; 3 s quick), each POSTing its
 * next async call as soon as it has its 202 (not waiting for the delivery: that is section (e)),
 * to a target that answers at once; then the drain, until every 202'd request reached the target
 * (lost: not there 60 s after the publishing ended). delivered/s is deliveries over first POST to
 * last receipt; CPU per delivery is each stack process's CPU over first POST to drain end, from
 * /proc, Postgres's backends and the ones that exited included. Run twice, on two stacks: the
 * edge with RELAY_BATCH_MAX_ITEMS=1 (before: one workflow per request) and with its defaults
 * (after: batching under load), each beside the bare one-local-activity workflow's ceiling with
 * as many starters on its own Temporal server, and the 202's latency one call at a time.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { Agent, request } from "undici";
import type { Stack } from "../dev/stack.ts";
import { temporalServerKindFromEnv } from "../dev/temporal-server.ts";
import { completedPerSecond, startCeilingWorker } from "./ceiling-runner.ts";
import {
  benchStack,
  type Cleanup,
  followReceipts,
  percentile,
  quick,
  treeCpuMs,
} from "./harness.ts";

const publishSeconds = Number(process.env.BENCH_PUBLISH_SECONDS ?? (quick ? 3 : 20));
/** The peer's publishers, and the ceiling's starters. */
const PUBLISHERS = 32;
const oneAtATimeCalls = quick ? 50 : 200;
/**
 * One call at a time again, each sent 100 ms after the last one's answer: the 202's own time on
 * a stack that has finished the last call's delivery. Back to back, each lone call's workflow
 * (about 20 ms of Temporal's and the worker's CPU) shares the 2 cores with the next call.
 */
const spacedCalls = quick ? 20 : 100;
const SPACED_PAUSE_MS = 100;
const ceilingSeconds = quick ? 2 : 10;
/** A 202'd request not at the target this long after the publishing ended is lost. */
const LOST_AFTER_MS = 60_000;

const variants = [
  { key: "before", name: "before: RELAY_BATCH_MAX_ITEMS=1", env: { RELAY_BATCH_MAX_ITEMS: "1" } },
  { key: "after", name: "after: the edge's defaults", env: {} },
] as const;

/** The stack's processes whose CPU counts, Postgres and Temporal with all they started. */
export const STACK_PROCESSES = ["edge", "control", "worker", "temporal", "postgres"] as const;
export type StackProcess = (typeof STACK_PROCESSES)[number];

interface Target {
  url: string;
  host: string;
  auth: string;
  /** The bench target's base URL (its GET /receipts). */
  receiptsUrl: string;
  /** The edge's own, for its /metrics. */
  edgeUrl: string;
}

interface PublishResult {
  accepted: number;
  /** Answers other than 202 (the publisher goes on to its next call). */
  refused: number;
  /** 202'd requests the target received, at least once; `duplicates` more than once. */
  delivered: number;
  duplicates: number;
  lost: number;
  acceptedP50Ms: number;
  acceptedP99Ms: number;
  acceptedPerSecond: number;
  deliveredPerSecond: number;
  /** From the publishing's end to the last receipt (or to giving up). */
  drainSeconds: number;
  /** Each process's CPU over first POST to drain end, in ms. */
  cpuMs: Record<StackProcess, number>;
  /** Calls per delivery workflow the edge started (its batches), from its /metrics. */
  callsPerWorkflow: number;
}

interface VariantResult {
  name: string;
  env: Record<string, string>;
  ceiling: { perSecond: number; cpuMsPerWorkflow: number; serverMs: number; workerMs: number };
  oneAtATime: { calls: number; p50Ms: number; p99Ms: number };
  spaced: { calls: number; p50Ms: number; p99Ms: number };
  load: PublishResult;
}

/** Both runs, printed as markdown and written to bench/results/publish.json. */
export async function publishComparison(cleanup: Cleanup): Promise<void> {
  const loadAverage = { before: loadavg() };
  const results: VariantResult[] = [];
  for (const variant of variants) {
    // A folder of its own, as benchStack's callers give it: embedded Postgres, run as another
    // user under root, must reach its data dir, and a folder within a mkdtemp folder is shut.
    const dir = await mkdtemp(join(tmpdir(), `relay-publish-${variant.key}-`));
    cleanup.add(() => rm(dir, { recursive: true, force: true }));
    results.push(await onStack(cleanup, dir, variant));
  }
  const report = {
    at: new Date(),
    publishSeconds,
    loadAverage: { ...loadAverage, after: loadavg() },
    results,
  };
  printPublish(report);
  await mkdir("bench/results", { recursive: true });
  await writeFile("bench/results/publish.json", JSON.stringify(report, null, 2));
  console.log("\nwrote bench/results/publish.json");
}

async function onStack(
  cleanup: Cleanup,
  dir: string,
  variant: (typeof variants)[number],
): Promise<VariantResult> {
  const { stack, targetPort, slug, key } = await benchStack(cleanup, dir, variant.env);
  const { temporal: temporalPid } = await stack.serverPids();

  // The ceiling first, its worker stopped before the relay's load: its polls are no part of it.
  const ceilingWorker = await startCeilingWorker(cleanup, dir, "ceiling", stack.temporal.address);
  const connection = await Connection.connect({ address: stack.temporal.address });
  const client = new Client({ connection });
  const ceilingCpu = () =>
    treeCpuMs({ server: temporalPid, worker: ceilingWorker.child?.pid ?? null });
  const { bare, cpuBefore, cpuAfter } = await (async () => {
    try {
      await completedPerSecond(client, "oneLocalActivity", PUBLISHERS, 1); // warm-up
      const cpuBefore = await ceilingCpu();
      const bare = await completedPerSecond(client, "oneLocalActivity", PUBLISHERS, ceilingSeconds);
      return { bare, cpuBefore, cpuAfter: await ceilingCpu() };
    } finally {
      await connection.close();
    }
  })();
  await ceilingWorker.stop();
  const serverMs = (cpuAfter.server ?? 0) - (cpuBefore.server ?? 0);
  const workerMs = (cpuAfter.worker ?? 0) - (cpuBefore.worker ?? 0);

  const target: Target = {
    url: `${stack.edgeUrl}/v1/async`,
    host: `${slug}.localhost`,
    auth: `Bearer ${key}`,
    receiptsUrl: `http://127.0.0.1:${targetPort}`,
    edgeUrl: stack.edgeUrl,
  };
  const cpu = stackCpu(stack);
  await publish(target, cpu, { concurrency: PUBLISHERS, seconds: 1 }); // warm-up
  const oneAtATime = await publish(target, cpu, { concurrency: 1, calls: oneAtATimeCalls });
  const spaced = await publish(target, cpu, {
    concurrency: 1,
    calls: spacedCalls,
    pauseMs: SPACED_PAUSE_MS,
  });
  const load = await publish(target, cpu, { concurrency: PUBLISHERS, seconds: publishSeconds });
  // Its Temporal and Postgres out of the way of the next stack's run.
  await stack.stop();
  return {
    name: variant.name,
    env: variant.env,
    ceiling: {
      perSecond: bare.perSecond,
      cpuMsPerWorkflow: (serverMs + workerMs) / bare.completed,
      serverMs: serverMs / bare.completed,
      workerMs: workerMs / bare.completed,
    },
    oneAtATime: {
      calls: oneAtATime.accepted,
      p50Ms: oneAtATime.acceptedP50Ms,
      p99Ms: oneAtATime.acceptedP99Ms,
    },
    spaced: { calls: spaced.accepted, p50Ms: spaced.acceptedP50Ms, p99Ms: spaced.acceptedP99Ms },
    load,
  };
}

/** Reads every stack process's CPU so far (ms), each with all it started. */
export function stackCpu(stack: Stack) {
  return async (): Promise<Record<StackProcess, number>> => {
    const { postgres, temporal } = await stack.serverPids();
    const pid = (name: "edge" | "control" | "worker") => stack.processes[name].child?.pid ?? null;
    const ms = await treeCpuMs({
      edge: pid("edge"),
      control: pid("control"),
      worker: pid("worker"),
      temporal,
      postgres,
    });
    return Object.fromEntries(
      STACK_PROCESSES.map((name) => [name, ms[name] ?? Number.NaN]),
    ) as Record<StackProcess, number>;
  };
}

/**
 * `concurrency` publishers, each POSTing its next call on its last one's answer, for `seconds`
 * or until `calls` were sent; then waits for every 202'd request at the target.
 */
async function publish(
  target: Target,
  cpu: () => Promise<Record<StackProcess, number>>,
  load: { concurrency: number; seconds?: number; calls?: number; pauseMs?: number },
): Promise<PublishResult> {
  /** The first receipt of each request id, in performance.now() ms. */
  const receivedAt = new Map<string, number>();
  /** 202'd requests not received yet. */
  const outstanding = new Set<string>();
  let duplicates = 0;
  const receipts = await followReceipts(target.receiptsUrl, (id) => {
    if (receivedAt.has(id)) duplicates++;
    else receivedAt.set(id, performance.now());
    outstanding.delete(id);
  });
  const dispatcher = new Agent({ connections: load.concurrency });
  const accepted: string[] = [];
  const acceptedMs: number[] = [];
  let refused = 0;
  let sent = 0;
  const cpuStart = await cpu();
  const startsBefore = await asyncStarts(target.edgeUrl);
  const started = performance.now();
  const deadline = started + (load.seconds ?? Number.POSITIVE_INFINITY) * 1000;
  const more = () =>
    performance.now() < deadline && sent < (load.calls ?? Number.POSITIVE_INFINITY);
  await Promise.all(
    Array.from({ length: load.concurrency }, async () => {
      while (more()) {
        sent++;
        const t = performance.now();
        const answer = await request(target.url, {
          method: "POST",
          dispatcher,
          headers: {
            host: target.host,
            authorization: target.auth,
            "content-type": "application/json",
          },
          body: '{"bench":true}',
        });
        const body = (await answer.body.json().catch(() => ({}))) as { requestId?: string };
        if (answer.statusCode !== 202 || !body.requestId) {
          refused++;
          continue;
        }
        acceptedMs.push(performance.now() - t);
        accepted.push(body.requestId);
        if (!receivedAt.has(body.requestId)) outstanding.add(body.requestId);
        if (load.pauseMs) await new Promise((resolve) => setTimeout(resolve, load.pauseMs));
      }
    }),
  );
  const published = performance.now();
  while (outstanding.size > 0 && performance.now() - published < LOST_AFTER_MS) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const cpuEnd = await cpu();
  const startsAfter = await asyncStarts(target.edgeUrl);
  const drained = performance.now();
  await receipts.stop();
  await dispatcher.close();
  const arrivals = accepted.flatMap((id) => receivedAt.get(id) ?? []);
  const lastReceipt = arrivals.reduce((last, at) => Math.max(last, at), started);
  return {
    accepted: accepted.length,
    refused,
    delivered: arrivals.length,
    duplicates,
    lost: accepted.length - arrivals.length,
    acceptedP50Ms: percentile(acceptedMs, 0.5),
    acceptedP99Ms: percentile(acceptedMs, 0.99),
    acceptedPerSecond: (accepted.length * 1000) / (published - started),
    deliveredPerSecond: (arrivals.length * 1000) / (lastReceipt - started),
    drainSeconds:
      (Math.max(lastReceipt, outstanding.size > 0 ? drained : published) - published) / 1000,
    cpuMs: Object.fromEntries(
      STACK_PROCESSES.map((name) => [name, cpuEnd[name] - cpuStart[name]]),
    ) as Record<StackProcess, number>,
    callsPerWorkflow:
      (startsAfter.calls - startsBefore.calls) / (startsAfter.workflows - startsBefore.workflows),
  };
}

/** The edge's async starts so far: workflows, and the calls they carried (its histogram). */
async function asyncStarts(edgeUrl: string): Promise<{ workflows: number; calls: number }> {
  const text = await (await fetch(`${edgeUrl}/metrics`)).text();
  const sample = (name: string) =>
    Number(
      text.match(new RegExp(`^relay_edge_async_requests_per_workflow_${name} (\\S+)$`, "m"))?.[1] ??
        0,
    );
  return { workflows: sample("count"), calls: sample("sum") };
}

function printPublish(report: {
  loadAverage: { before: number[]; after: number[] };
  results: VariantResult[];
}) {
  const { results } = report;
  const f = (n: number, digits = 1) => n.toFixed(digits);
  const stackMs = (r: VariantResult) =>
    STACK_PROCESSES.reduce((sum, name) => sum + r.load.cpuMs[name], 0) / r.load.delivered;
  const load = (averages: number[]) => averages.map((a) => a.toFixed(2)).join(" ");
  console.log(
    `\n(h) issue 27: ${PUBLISHERS} publishers for ${publishSeconds} s, each posting its next call on its 202, then the drain; bare one-local-activity ceiling with ${PUBLISHERS} starters on the same Temporal server, ${ceilingSeconds} s; CPU from /proc over first POST to drain end (load average ${load(report.loadAverage.before)} before, ${load(report.loadAverage.after)} after)\n`,
  );
  console.log(
    "| stack | 202'd | 202/s | 202 p50 / p99 ms | delivered/s | lost | refused | duplicates | drain s | ceiling /s | delivered / ceiling (goal ≥ 6x) | stack CPU ms per delivery (goal ≤ 3) | 202 one call at a time p50 / p99 ms (goal < 10) | the same, 100 ms apart | calls per workflow |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const l = r.load;
    console.log(
      `| ${r.name} | ${l.accepted} | ${f(l.acceptedPerSecond)} | ${f(l.acceptedP50Ms, 2)} / ${f(l.acceptedP99Ms, 2)} | ${f(l.deliveredPerSecond)} | ${l.lost} | ${l.refused} | ${l.duplicates} | ${f(l.drainSeconds)} | ${f(r.ceiling.perSecond)} | ${f(l.deliveredPerSecond / r.ceiling.perSecond, 2)}x | ${f(stackMs(r), 2)} | ${f(r.oneAtATime.p50Ms, 2)} / ${f(r.oneAtATime.p99Ms, 2)} | ${f(r.spaced.p50Ms, 2)} / ${f(r.spaced.p99Ms, 2)} | ${f(l.callsPerWorkflow)} |`,
    );
  }
  const [before, after] = results as [VariantResult, VariantResult];
  console.log(
    `| after / before | ${f(after.load.accepted / before.load.accepted, 2)}x | ${f(after.load.acceptedPerSecond / before.load.acceptedPerSecond, 2)}x | | ${f(after.load.deliveredPerSecond / before.load.deliveredPerSecond, 2)}x | | | | | | | ${f(stackMs(after) / stackMs(before), 2)}x | | | |`,
  );
  console.log(
    "| peer: Hookdeck Outpost, this machine, same shape (issue 27) | | | | 1,630-1,730 | | | | | | | 0.93-0.99 (all its processes) | | | |",
  );
  console.log("| Relay at e5a3d09 (issue 27) | | | | 60.5-61.4 | | | | | | | 26.6 | | | |");

  console.log("\nCPU ms per delivery, by process (first POST to drain end)\n");
  console.log(`| process | ${results.map((r) => r.name).join(" | ")} |`);
  console.log(`|---|${results.map(() => "---|").join("")}`);
  // On Temporal's own server (RELAY_TEMPORAL_SERVER=postgres) its store is the stack's Postgres.
  const ownServer = temporalServerKindFromEnv() === "postgres";
  const names: Record<StackProcess, string> = {
    edge: "edge",
    control: "control plane",
    worker: "worker",
    temporal: ownServer ? "Temporal's own server" : "Temporal dev server",
    postgres: ownServer
      ? "Postgres (postmaster and all its backends: Relay's and Temporal's stores)"
      : "Postgres (postmaster and all its backends)",
  };
  for (const name of STACK_PROCESSES) {
    console.log(
      `| ${names[name]} | ${results.map((r) => f(r.load.cpuMs[name] / r.load.delivered, 2)).join(" | ")} |`,
    );
  }
  console.log(`| whole stack | ${results.map((r) => f(stackMs(r), 2)).join(" | ")} |`);
  console.log(
    `| bare one-local-activity workflow: CPU ms per workflow (server + ceiling worker) | ${results.map((r) => `${f(r.ceiling.cpuMsPerWorkflow, 2)} (${f(r.ceiling.serverMs, 2)} + ${f(r.ceiling.workerMs, 2)})`).join(" | ")} |`,
  );
}
