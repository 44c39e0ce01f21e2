/**
 * What exporting traces costs (`npm run bench:tracing`): two stacks side by side, one exporting
 * its spans over OTLP/HTTP to a collector in this process (which only counts what it is sent) and
 * one not, measured in turns (off, on, off, on) so the machine's drift falls on both. Per turn: a
 * sync call at one connection, an async 202 at one connection, then sustained delivery
 * (bench/delivery.ts), whose callers wait for each delivery: the async calls' backlog drains
 * within the turn, never into the other stack's; over it, the worker's and the edge's CPU per
 * request delivered (Linux's /proc), where tracing's own work would show beyond the noise. Prints each turn and the ratio of the means,
 * on / off, and writes JSON. First, what tracing costs a call when it is off: the span calls an
 * async call makes (edge, start, attempt) against the API's no-op, timed in this process, which
 * registers no SDK.
 */

import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  callerTrace,
  SpanKind,
  spanAttribute,
  startClientSpan,
  startSpan,
  traceHeaders,
  traceIdOf,
  untraced,
} from "../core/tracing.ts";
import { deliveredPerSecond } from "./delivery.ts";
import {
  benchStack,
  type Cleanup,
  processCpuMs,
  quick,
  requireTools,
  runBench,
} from "./harness.ts";
import { wrk } from "./wrk.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? (quick ? 1 : 8));
const deliverySeconds = Number(process.env.BENCH_DELIVERY_SECONDS ?? (quick ? 3 : 20));
const turns = ["off", "on", "off", "on"] as const;

/** A collector that takes OTLP/HTTP posts and counts them and their bytes, nothing more. */
async function countingCollector(cleanup: Cleanup) {
  const received = { posts: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => {
      received.bytes += chunk.byteLength;
    });
    req.on("end", () => {
      received.posts++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanup.add(async () => void server.close());
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, received };
}

/** Nanoseconds per call of the tracing one async call does (edge, start, attempt), when off. */
function offCostNs(calls: number): number {
  const headers = new Headers({
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  });
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const edge = startSpan("POST", callerTrace(headers), {}, SpanKind.SERVER);
    traceIdOf(edge.context);
    const start = startClientSpan("StartWorkflow:deliverRequest", edge.context, {});
    traceHeaders(start.context);
    start.span.end();
    const attempt = startClientSpan("POST t", untraced, { [spanAttribute.attempt]: 1 });
    traceHeaders(attempt.context);
    attempt.span.end();
    edge.span.end();
  }
  return ((performance.now() - started) * 1e6) / calls;
}

type Stacked = Awaited<ReturnType<typeof benchStack>>;

/** The worker's and the edge's CPU so far, in ms: where tracing's cost would show. */
async function relayCpuMs({ stack }: Stacked) {
  return { worker: await processCpuMs(stack, "worker"), edge: await processCpuMs(stack, "edge") };
}

async function measure(dir: string, stacked: Stacked) {
  const { stack, slug, key, targetPort } = stacked;
  const host = `${slug}.localhost`;
  const auth = `Bearer ${key}`;
  const at = (path: string) => `${stack.edgeUrl}${path}`;
  const sync1 = await wrk(dir, at("/v1/sync"), { seconds, connections: 1, host, auth });
  const async1 = await wrk(dir, at("/v1/async"), { seconds, connections: 1, host, auth });
  const cpuBefore = await relayCpuMs(stacked);
  const delivery = await deliveredPerSecond({
    edgeUrl: stack.edgeUrl,
    path: "/v1/async",
    host,
    auth,
    targetUrl: `http://127.0.0.1:${targetPort}`,
    concurrency: 32,
    seconds: deliverySeconds,
  });
  const cpuAfter = await relayCpuMs(stacked);
  const delivered = delivery.deliveredPerSecond * deliverySeconds;
  return {
    syncP50Ms: sync1.p50Ms,
    asyncP50Ms: async1.p50Ms,
    deliveredPerSecond: delivery.deliveredPerSecond,
    deliveredP50Ms: delivery.deliveredP50Ms,
    // Over the sustained delivery: each process's CPU per request delivered.
    workerCpuMs: (cpuAfter.worker - cpuBefore.worker) / delivered,
    edgeCpuMs: (cpuAfter.edge - cpuBefore.edge) / delivered,
    errors: sync1.errors + async1.errors + delivery.refused + delivery.lost,
  };
}

type Figures = Awaited<ReturnType<typeof measure>>;

await runBench(async (cleanup) => {
  await requireTools([{ command: "wrk", debianPackage: "wrk" }]);
  offCostNs(100_000); // warm-up: the JIT
  const offNs = offCostNs(1_000_000);
  console.log(`off: the span calls of one async call cost ${offNs.toFixed(0)} ns`);
  // A folder per stack: run as root, Postgres must reach its folder, which mkdtemp makes 0700.
  const folder = async (name: string) => {
    const dir = await mkdtemp(join(tmpdir(), `relay-bench-tracing-${name}-`));
    cleanup.add(() => rm(dir, { recursive: true, force: true }));
    return dir;
  };
  const dir = await folder("wrk");
  const collector = await countingCollector(cleanup);
  const stacks = {
    off: await benchStack(cleanup, await folder("off")),
    on: await benchStack(cleanup, await folder("on"), {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    }),
  };
  for (const stacked of Object.values(stacks)) await measure(dir, stacked); // warm-up
  const runs: { turn: (typeof turns)[number]; figures: Figures }[] = [];
  for (const turn of turns) {
    const figures = await measure(dir, stacks[turn]);
    runs.push({ turn, figures });
    console.log(turn.padEnd(4), JSON.stringify(figures));
  }
  const mean = (turn: string, key: keyof Figures) => {
    const values = runs.filter((r) => r.turn === turn).map((r) => r.figures[key]);
    return values.reduce((a, b) => a + b, 0) / values.length;
  };
  const keys = [
    "syncP50Ms",
    "asyncP50Ms",
    "deliveredPerSecond",
    "deliveredP50Ms",
    "workerCpuMs",
    "edgeCpuMs",
  ] as const;
  console.log(`\n${"".padEnd(20)}${"off".padStart(10)}${"on".padStart(10)}  on/off`);
  const ratios = Object.fromEntries(
    keys.map((key) => {
      const [off, on] = [mean("off", key), mean("on", key)];
      console.log(
        `${key.padEnd(20)}${off.toFixed(2).padStart(10)}${on.toFixed(2).padStart(10)}  ${(on / off).toFixed(2)}x`,
      );
      return [key, { off, on, ratio: on / off }];
    }),
  );
  console.log(`collector: ${collector.received.posts} posts, ${collector.received.bytes} bytes`);
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/tracing.json",
    JSON.stringify({ offNs, runs, ratios, collector: collector.received }, null, 2),
  );
  console.log("wrote bench/results/tracing.json");
});
