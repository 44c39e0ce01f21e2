/**
 * The bare-workflow ceiling, as a part other benches use: a ceiling worker (bench/ceiling-worker.ts,
 * a process of its own, no I/O) on a task queue of its own, and `concurrency` starters running one
 * workflow shape to completion for a while, each starting its next when its last one closed.
 */
import { join } from "node:path";
import type { Client } from "@temporalio/client";
import { fairnessOf } from "../core/temporal.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { type Cleanup, percentile } from "./harness.ts";

export const CEILING_TASK_QUEUE = "ceiling";

/** Starts a ceiling worker polling the server at `temporalAddress`; stopped by `cleanup`. */
export async function startCeilingWorker(
  cleanup: Cleanup,
  dir: string,
  name: string,
  temporalAddress: string,
  /** Its own task queue, and BENCH_PAYLOAD_SECRET to seal its payloads (bench/sync-gap.ts). */
  options: { taskQueue?: string; payloadSecret?: string } = {},
): Promise<ManagedProcess> {
  const worker = new ManagedProcess(
    {
      name: `${name} worker`,
      entry: "bench/ceiling-worker.ts",
      readyLine: "ceiling worker polling",
      env: {
        TEMPORAL_ADDRESS: temporalAddress,
        BENCH_TASK_QUEUE: options.taskQueue ?? CEILING_TASK_QUEUE,
        ...(options.payloadSecret && { BENCH_PAYLOAD_SECRET: options.payloadSecret }),
      },
    },
    logFile(join(dir, `${name}-worker.log`)),
  );
  cleanup.add(() => worker.stop());
  await worker.start();
  return worker;
}

let runs = 0;

/** One workflow of `shape` (with `args`), start to result, in ms. */
export async function runWorkflow(
  client: Client,
  shape: string,
  args: unknown[] = [],
): Promise<number> {
  const t = performance.now();
  const run = runs++;
  await client.workflow.execute(shape, {
    taskQueue: CEILING_TASK_QUEUE,
    workflowId: `${shape}-${process.pid}-${run}`,
    args,
    // As Relay's starts carry their project: a few keys, for a server with fairness on to balance.
    priority: fairnessOf(`project-${run % 8}`),
  });
  return performance.now() - t;
}

/** Workflows of `shape` completed per second by `concurrency` starters over `seconds`. */
export async function completedPerSecond(
  client: Client,
  shape: string,
  concurrency: number,
  seconds: number,
  args: unknown[] = [],
): Promise<{ perSecond: number; p50Ms: number; completed: number }> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) latencies.push(await runWorkflow(client, shape, args));
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  return {
    perSecond: latencies.length / elapsedS,
    p50Ms: percentile(latencies, 0.5),
    completed: latencies.length,
  };
}
