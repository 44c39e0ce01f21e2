/**
 * Where a sync call's time goes beyond the bare workflow issue 27 measures it against
 * (`npm run bench:sync-gap`): one call at a time on one stack, the bare one-local-activity
 * workflow, then the same with one thing of a sync call's added at a time (its payloads sealed
 * by Relay's codec; its start's search attributes, fairness key, timeout and input, and its
 * status set at the end), then the sync call itself through the edge, less the target's own time
 * (a direct call). The bare workflows' local activity says when it ran, so their time splits into
 * the start, the wait for the local activity, and the way back to the result. Each kind's CPU per
 * call is read too, by process, less what the processes spend idle over the same time: one call
 * at a time keeps the stack's processes busy on this machine's two cores, so a call's time follows
 * its CPU. The kinds take turns, a few calls each, so the machine's drift falls on all of them alike.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { request } from "undici";
import { PayloadCipher } from "../core/payload-codec.ts";
import { fairnessOf, requestSearchAttributeLists } from "../core/temporal.ts";
import { nodeAesGcm } from "../platform/node-crypto.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import { CEILING_TASK_QUEUE, startCeilingWorker } from "./ceiling-runner.ts";
import { benchStack, percentile, quick, runBench, treeCpuMs } from "./harness.ts";
import { stackCpu } from "./publish.ts";

const rounds = quick ? 2 : 6;
const callsPerTurn = quick ? 5 : 25;
/** Between calls, as a caller one at a time leaves the stack idle. */
const PAUSE_MS = 20;
const SEALED_QUEUE = "ceiling-sealed";
/** A turn of pauses alone, each round: what the processes spend idle. */
const IDLE = "idle: the pauses alone";
const SETTLE_MS = 500;
const IDLE_MS_PER_CALL = 60;

/** One call's times in ms; the split is known for the bare workflows only. */
interface Timing {
  total: number;
  split?: { start: number; toActivity: number; toResult: number };
}

const clock = () => performance.timeOrigin + performance.now();

/** Who spends a call's CPU: the caller is this process (the bench's client, or its HTTP call). */
const CPU_COLUMNS = ["caller", "edge", "control", "worker", "temporal", "postgres"] as const;
type CpuColumn = (typeof CPU_COLUMNS)[number];
type CpuMs = Record<CpuColumn, number>;
const cpuDelta = (from: CpuMs, to: CpuMs): CpuMs =>
  Object.fromEntries(CPU_COLUMNS.map((name) => [name, to[name] - from[name]])) as CpuMs;

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-sync-gap-"));
  const { stack, targetPort, slug, key } = await benchStack(cleanup, dir);
  const payloadSecret = randomBytes(32).toString("hex");
  const bareWorkers = [
    await startCeilingWorker(cleanup, dir, "ceiling", stack.temporal.address),
    await startCeilingWorker(cleanup, dir, "sealed", stack.temporal.address, {
      taskQueue: SEALED_QUEUE,
      payloadSecret,
    }),
  ];
  const stackMs = stackCpu(stack);
  const ownMs = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  /** Every process's CPU so far; the caller's read on the side of the /proc scan `scanFirst` says. */
  const cpuNow = async (scanFirst: boolean): Promise<CpuMs> => {
    const before = scanFirst ? undefined : ownMs();
    const processes = await stackMs();
    const bare = await treeCpuMs(
      Object.fromEntries(bareWorkers.map((w, i) => [i, w.child?.pid ?? null])),
    );
    const bareMs = Object.values(bare).reduce((sum, ms) => sum + ms, 0);
    return { caller: before ?? ownMs(), ...processes, worker: processes.worker + bareMs };
  };
  const connection = await Connection.connect({ address: stack.temporal.address });
  cleanup.add(() => connection.close());
  const plain = new Client({ connection });
  const sealed = new Client({
    connection,
    dataConverter: relayDataConverter(await PayloadCipher.fromSecrets([payloadSecret], nodeAesGcm)),
  });

  const body = JSON.stringify({ order: 42 });
  let runs = 0;
  const bare =
    (client: Client, taskQueue: string, asSyncCall: boolean) => async (): Promise<Timing> => {
      const request = { project: "bench", line: "v1", endpoint: "sync" };
      const started = clock();
      const handle = await client.workflow.start("stampedLocalActivity", {
        taskQueue,
        workflowId: `sync-gap-${process.pid}-${runs++}`,
        priority: fairnessOf(request.project),
        ...(asSyncCall
          ? {
              args: [true, "x".repeat(1500)],
              searchAttributes: requestSearchAttributeLists(request, "delivering"),
              workflowExecutionTimeout: "40s",
            }
          : { args: [] }),
      });
      const answered = clock();
      const ran = (await handle.result()) as number;
      const ended = clock();
      return {
        total: ended - started,
        split: { start: answered - started, toActivity: ran - answered, toResult: ended - ran },
      };
    };
  const timed =
    (url: string, headers: Record<string, string> = {}) =>
    async (): Promise<Timing> => {
      const started = clock();
      const response = await request(url, { method: "POST", headers, body });
      const text = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`${url}: ${response.statusCode} ${text}`);
      return { total: clock() - started };
    };
  const kinds: [string, () => Promise<Timing>][] = [
    ["bare one-local-activity workflow", bare(plain, CEILING_TASK_QUEUE, false)],
    ["+ payloads sealed by Relay's codec", bare(sealed, SEALED_QUEUE, false)],
    [
      "+ a sync call's start (search attributes, timeout, 1.5 KB input) and status",
      bare(sealed, SEALED_QUEUE, true),
    ],
    ["the target, called directly", timed(`http://127.0.0.1:${targetPort}/sync`)],
    [
      "a sync call through the edge",
      timed(`${stack.edgeUrl}/v1/sync`, {
        host: `${slug}.localhost`,
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
      }),
    ],
  ];
  for (const [, call] of kinds) for (let i = 0; i < 5; i++) await call(); // warm-up

  const timings = new Map<string, Timing[]>(kinds.map(([name]) => [name, []]));
  const zero = () => Object.fromEntries(CPU_COLUMNS.map((name) => [name, 0])) as CpuMs;
  /** CPU spent and wall time taken, per kind over its turns, and idle (the pauses alone). */
  const spent = new Map<string, { cpu: CpuMs; ms: number }>(
    [...kinds.map(([name]) => name), IDLE].map((name) => [name, { cpu: zero(), ms: 0 }]),
  );
  const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  /**
   * A turn's CPU is read until SETTLE_MS after its last call, so what its calls left for later
   * (collecting their garbage, Temporal's visibility writes) is theirs and not the next turn's.
   */
  const turn = async (name: string, run: () => Promise<void>) => {
    const from = await cpuNow(true);
    const startedAt = performance.now();
    await run();
    await wait(SETTLE_MS);
    const ms = performance.now() - startedAt;
    const used = cpuDelta(from, await cpuNow(false));
    const total = spent.get(name) as { cpu: CpuMs; ms: number };
    for (const column of CPU_COLUMNS) total.cpu[column] += used[column];
    total.ms += ms;
  };
  const pause = () => wait(PAUSE_MS);
  for (let round = 0; round < rounds; round++) {
    for (const [name, call] of kinds) {
      await turn(name, async () => {
        for (let i = 0; i < callsPerTurn; i++) {
          timings.get(name)?.push(await call());
          await pause();
        }
      });
    }
    // As long as a sync call's turn: the processes' background work comes in seconds.
    await turn(IDLE, () => wait(callsPerTurn * IDLE_MS_PER_CALL));
  }

  const p50 = (values: number[]) => percentile(values, 0.5);
  const totalOf = (name: string) => p50((timings.get(name) ?? []).map((t) => t.total));
  const bareMs = totalOf("bare one-local-activity workflow");
  const syncAdded =
    totalOf("a sync call through the edge") - totalOf("the target, called directly");
  const cell = (value: number | undefined) => (value === undefined ? "" : value.toFixed(2));
  console.log(
    `\nsync gap: ${rounds} rounds of ${callsPerTurn} calls per kind, one at a time, ${PAUSE_MS} ms apart (p50, ms)\n`,
  );
  console.log(
    "| kind | start | start answered to the local activity | local activity to the result | start to result | over the bare workflow |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const [name] of kinds) {
    const runs = timings.get(name) ?? [];
    const split = (part: "start" | "toActivity" | "toResult") =>
      runs[0]?.split ? p50(runs.map((t) => t.split?.[part] ?? 0)) : undefined;
    const total = totalOf(name);
    const over = name === "the target, called directly" ? undefined : total - bareMs;
    console.log(
      `| ${name} | ${cell(split("start"))} | ${cell(split("toActivity"))} | ${cell(split("toResult"))} | ${cell(total)} | ${cell(over)} |`,
    );
  }
  console.log(
    `| the sync call less the direct call (issue 27's "added"), over the bare workflow | | | | ${cell(syncAdded)} | ${cell(syncAdded - bareMs)} |`,
  );

  // Each process's idle CPU per ms of wall time, taken off each kind's over its turns' time.
  const idle = spent.get(IDLE) as { cpu: CpuMs; ms: number };
  const perCall = (name: string): CpuMs => {
    const { cpu, ms } = spent.get(name) as { cpu: CpuMs; ms: number };
    const calls = timings.get(name)?.length ?? 1;
    return Object.fromEntries(
      CPU_COLUMNS.map((column) => [
        column,
        (cpu[column] - (idle.cpu[column] / idle.ms) * ms) / calls,
      ]),
    ) as CpuMs;
  };
  const sum = (cpu: CpuMs) => CPU_COLUMNS.reduce((total, column) => total + cpu[column], 0);
  const bareCpu = sum(perCall("bare one-local-activity workflow"));
  console.log(
    `\nCPU per call by process (ms; /proc's 10 ms ticks over each kind's turns), less each process's idle CPU over the same time (idle: ${CPU_COLUMNS.map((c) => `${c} ${((idle.cpu[c] / idle.ms) * 1000).toFixed(0)}`).join(", ")} ms/s)\n`,
  );
  console.log(
    "| kind | caller | edge | control plane | worker | Temporal | Postgres | total | over the bare workflow |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const [name] of kinds) {
    const cpu = perCall(name);
    const columns = CPU_COLUMNS.map((column) => cell(cpu[column])).join(" | ");
    console.log(`| ${name} | ${columns} | ${cell(sum(cpu))} | ${cell(sum(cpu) - bareCpu)} |`);
  }
});
