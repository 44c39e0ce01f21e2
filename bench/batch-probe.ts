/**
 * Issue 27's first measurement, before any batching is built (`npm run bench:batch-probe`): what
 * a batch workflow costs Temporal and the worker per item, by batch size. One dev server with
 * Relay's configuration (dev/temporal-config.ts) and a bare worker (bench/ceiling-worker.ts, no
 * I/O); per size, starters keep about `ITEMS_IN_FLIGHT` items in flight in workflows of that many
 * local activities at once (bench/ceiling-workflows.ts `localActivities`), each starting its next
 * when its last closed. Size 1 is today's one workflow per request. Read: items per second, and
 * the server's and the worker's CPU per item (Linux's /proc). The sizes run up, then down, and
 * each figure is the mean of its two turns, so the machine's drift falls on all of them alike.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { freePorts } from "../dev/ports.ts";
import { logFile } from "../dev/processes.ts";
import { findTemporalCli, startTemporalDevServer } from "../dev/temporal.ts";
import { temporalDynamicConfig } from "../dev/temporal-config.ts";
import { completedPerSecond, startCeilingWorker } from "./ceiling-runner.ts";
import { cpuMs, quick, runBench } from "./harness.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? (quick ? 2 : 10));
const sizes = (process.env.BENCH_BATCH_SIZES ?? "1,4,16,32,64").split(",").map(Number);
/** As many as the sustained-delivery bench's callers keep in flight, and then some. */
const ITEMS_IN_FLIGHT = 64;

interface Turn {
  itemsPerSecond: number;
  serverCpuMsPerItem: number;
  workerCpuMsPerItem: number;
  p50Ms: number;
}

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-batch-probe-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const [grpc = 0, http = 0, ui = 0] = await freePorts(3);
  const temporal = await startTemporalDevServer(
    await findTemporalCli(),
    join(dir, "temporal"),
    { grpc, http, ui },
    { dynamicConfig: temporalDynamicConfig, output: logFile(join(dir, "temporal.log")) },
  );
  cleanup.add(() => temporal.stop());
  const worker = await startCeilingWorker(cleanup, dir, "batch", temporal.address);
  const connection = await Connection.connect({ address: temporal.address });
  cleanup.add(() => connection.close());
  const client = new Client({ connection });
  await completedPerSecond(client, "localActivities", 8, 1, [1]); // warm-up

  const turns = new Map<number, Turn[]>();
  for (const size of [...sizes, ...[...sizes].reverse()]) {
    const starters = Math.max(1, Math.round(ITEMS_IN_FLIGHT / size));
    const before = { server: await cpuMs(temporal.process), worker: await cpuMs(worker) };
    const run = await completedPerSecond(client, "localActivities", starters, seconds, [size]);
    const items = run.perSecond * seconds * size;
    turns.set(size, [
      ...(turns.get(size) ?? []),
      {
        itemsPerSecond: run.perSecond * size,
        serverCpuMsPerItem: ((await cpuMs(temporal.process)) - before.server) / items,
        workerCpuMsPerItem: ((await cpuMs(worker)) - before.worker) / items,
        p50Ms: run.p50Ms,
      },
    ]);
  }

  const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
  const rows = sizes.map((size) => {
    const of = turns.get(size) ?? [];
    const field = (name: keyof Turn) => mean(of.map((turn) => turn[name]));
    return {
      size,
      itemsPerSecond: field("itemsPerSecond"),
      serverCpuMsPerItem: field("serverCpuMsPerItem"),
      workerCpuMsPerItem: field("workerCpuMsPerItem"),
      p50Ms: field("p50Ms"),
      turns: of,
    };
  });
  const single = rows.find((row) => row.size === 1);
  console.log(
    `\nBatch workflows of N local activities, ~${ITEMS_IN_FLIGHT} items in flight, ${seconds} s a turn:`,
  );
  console.log(
    "| items per workflow | items/s | vs one per item | server CPU per item | worker CPU per item | workflow p50 |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) {
    console.log(
      `| ${row.size} | ${row.itemsPerSecond.toFixed(0)} | ${single ? (row.itemsPerSecond / single.itemsPerSecond).toFixed(1) : "?"}x | ${row.serverCpuMsPerItem.toFixed(2)} ms | ${row.workerCpuMsPerItem.toFixed(2)} ms | ${row.p50Ms.toFixed(0)} ms |`,
    );
  }
  await mkdir("bench/results", { recursive: true });
  await writeFile("bench/results/batch-probe.json", JSON.stringify(rows, null, 2));
  console.log("wrote bench/results/batch-probe.json");
});
