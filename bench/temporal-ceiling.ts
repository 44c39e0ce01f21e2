/**
 * Temporal's ceiling on this machine, and what Relay's Temporal configuration buys: two dev
 * servers in one run, one with Temporal's defaults and one with dev/temporal-config.ts, each with
 * a worker (a process of its own, no I/O) running bare workflows (bench/ceiling-workflows.ts).
 * Per shape, `concurrency` starters run workflows to completion for a fixed time (completed per
 * second); then one workflow at a time, start to result. The shapes alternate between the servers
 * so drift in the machine's load hits both alike. Then it checks each value took effect on the
 * tuned server (the dev server takes unknown keys without a word): task-queue partitions, eager
 * activities counted by the server's metrics, and the queue readers' wait (task_latency_load).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { freePorts } from "../dev/ports.ts";
import { findTemporalCli, startTemporalDevServer } from "../dev/temporal.ts";
import {
  type DynamicConfig,
  temporalDefaults,
  temporalDynamicConfig,
  withoutFairness,
} from "../dev/temporal-config.ts";
import {
  CEILING_TASK_QUEUE,
  completedPerSecond,
  runWorkflow,
  startCeilingWorker,
} from "./ceiling-runner.ts";
import { percentile, quick, runBench } from "./harness.ts";

const seconds = Number(process.env.BENCH_CEILING_SECONDS ?? (quick ? 1 : 10));
/**
 * What Relay's configuration is measured against: Temporal's defaults, or with
 * BENCH_CEILING_BASELINE=no-fairness Relay's own less task queue fairness (what fairness costs).
 */
const baseline =
  process.env.BENCH_CEILING_BASELINE === "no-fairness"
    ? { name: "Relay's, no fairness", config: withoutFairness }
    : { name: "Temporal defaults", config: temporalDefaults };
const concurrency = Number(process.env.BENCH_CEILING_CONCURRENCY ?? 32);
const oneAtATimeRuns = Number(process.env.BENCH_CEILING_RUNS ?? (quick ? 20 : 100));
const shapes = ["noActivity", "oneLocalActivity", "oneActivity", "localAndThreeActivities"];
const shapeNames: Record<string, string> = {
  noActivity: "no activity",
  oneLocalActivity: "one local activity",
  oneActivity: "one activity",
  localAndThreeActivities: "one local + three activities",
};

interface Server {
  name: string;
  client: Client;
  metricsUrl: string;
}

// Two extra dev servers take longer to start than a developer's loop allows; the relay bench
// runs its own ceilings on its server, quick mode included.
if (quick) console.log("temporal-ceiling: skipped under BENCH_QUICK=1 (run npm run bench for it)");
else
  await runBench(async (cleanup) => {
    const cli = await findTemporalCli();
    const dir = await mkdtemp(join(tmpdir(), "relay-ceiling-"));
    cleanup.add(() => rm(dir, { recursive: true, force: true }));
    // Both servers' ports at once, so the two starts (run side by side) cannot pick the same one.
    const ports = await freePorts(8);
    const start = async (
      name: string,
      dynamicConfig: DynamicConfig,
      [grpc = 0, http = 0, ui = 0, metrics = 0]: number[],
    ): Promise<Server> => {
      const temporal = await startTemporalDevServer(
        cli,
        join(dir, name),
        { grpc, http, ui },
        { dynamicConfig, metricsPort: metrics },
      );
      cleanup.add(() => temporal.stop());
      await startCeilingWorker(cleanup, dir, name, temporal.address);
      const connection = await Connection.connect({ address: temporal.address });
      cleanup.add(() => connection.close());
      return {
        name,
        client: new Client({ connection }),
        metricsUrl: `http://127.0.0.1:${metrics}/metrics`,
      };
    };
    const servers = await Promise.all([
      start("defaults", baseline.config, ports.slice(0, 4)),
      start("tuned", temporalDynamicConfig, ports.slice(4)),
    ]);

    const sustained = (server: Server, shape: string, durationS: number) =>
      completedPerSecond(server.client, shape, concurrency, durationS);
    const oneAtATime = async (server: Server, shape: string) => {
      const latencies: number[] = [];
      for (let i = 0; i < oneAtATimeRuns; i++)
        latencies.push(await runWorkflow(server.client, shape));
      return { p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99) };
    };

    // Warm-up: the workers' first workflow tasks, and the servers' caches.
    for (const server of servers) await sustained(server, "localAndThreeActivities", 1);

    const rows: { figure: string; unit: string; defaults: number; tuned: number }[] = [];
    for (const shape of shapes) {
      const [defaults, tuned] = [
        await sustained(servers[0], shape, seconds),
        await sustained(servers[1], shape, seconds),
      ];
      rows.push({
        figure: `${shapeNames[shape]}: completed per second (${concurrency} starters)`,
        unit: "/s",
        defaults: defaults.perSecond,
        tuned: tuned.perSecond,
      });
    }
    for (const shape of ["noActivity", "oneLocalActivity"]) {
      const [defaults, tuned] = [
        await oneAtATime(servers[0], shape),
        await oneAtATime(servers[1], shape),
      ];
      rows.push({
        figure: `${shapeNames[shape]}: one at a time, start to result p50`,
        unit: "ms",
        defaults: defaults.p50Ms,
        tuned: tuned.p50Ms,
      });
    }

    const effects = [];
    for (const server of servers)
      effects.push({ server: server.name, ...(await inEffect(server)) });

    console.log(
      `\nTemporal ceiling: bare workflows, a worker with no I/O, ${seconds} s per shape (this machine, one run)\n`,
    );
    console.log(`| figure | ${baseline.name} | Relay's config | ratio (Relay's / baseline) |`);
    console.log("|---|---|---|---|");
    for (const row of rows) {
      const ratio = row.tuned / row.defaults;
      console.log(
        `| ${row.figure} | ${row.defaults.toFixed(1)} ${row.unit} | ${row.tuned.toFixed(1)} ${row.unit} | ${ratio.toFixed(2)}x |`,
      );
    }
    console.log("\nIn effect (read back from each server)\n");
    console.log(
      "| server | task-queue partitions (workflow / activity) | eager activities | queue reader wait, mean ms (transfer / timer / visibility) |",
    );
    console.log("|---|---|---|---|");
    for (const e of effects) {
      const wait = (category: string) => e.loadWaitMs[category]?.toFixed(1) ?? "-";
      console.log(
        `| ${e.server} | ${e.partitions.workflow} / ${e.partitions.activity} | ${e.eagerActivities} | ${wait("transfer")} / ${wait("timer")} / ${wait("visibility")} |`,
      );
    }
    await mkdir("bench/results", { recursive: true });
    await writeFile(
      "bench/results/temporal-ceiling.json",
      JSON.stringify(
        { at: new Date(), seconds, concurrency, oneAtATimeRuns, rows, effects },
        null,
        2,
      ),
    );
    console.log("\nwrote bench/results/temporal-ceiling.json");
  });

/** What the server reports of the values in dev/temporal-config.ts. */
async function inEffect(server: Server) {
  const { workflowTaskQueuePartitions, activityTaskQueuePartitions } =
    await server.client.workflowService.listTaskQueuePartitions({
      namespace: "default",
      taskQueue: { name: CEILING_TASK_QUEUE },
    });
  const metrics = await (await fetch(server.metricsUrl)).text();
  return {
    partitions: {
      workflow: workflowTaskQueuePartitions?.length ?? 0,
      activity: activityTaskQueuePartitions?.length ?? 0,
    },
    eagerActivities: sum(metrics, /^activity_eager_execution(?:\{[^}]*\})? (\S+)$/gm),
    loadWaitMs: loadWait(metrics),
  };
}

function sum(metrics: string, line: RegExp): number {
  let total = 0;
  for (const match of metrics.matchAll(line)) total += Number(match[1]);
  return total;
}

/** Mean task_latency_load (a task's wait from written to loaded) per queue, in ms. */
function loadWait(metrics: string): Record<string, number> {
  const means: Record<string, number> = {};
  for (const [category, prefix] of [
    ["transfer", "Transfer"],
    ["timer", "Timer"],
    ["visibility", "Visibility"],
  ] as const) {
    const tagged = (suffix: string) =>
      new RegExp(`^task_latency_load_${suffix}\\{[^}]*task_type="${prefix}[^}]*\\} (\\S+)$`, "gm");
    const count = sum(metrics, tagged("count"));
    if (count > 0) means[category] = (sum(metrics, tagged("sum")) / count) * 1000;
  }
  return means;
}
