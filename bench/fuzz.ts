/**
 * `npm run fuzz`: a bounded adversarial run against a real stack of its own (bench/fuzzer.ts
 * says what is sent). Reports the answers by component and status class, every answer of 500
 * with its request, whether every process of the stack is still alive, and the edge's p99 for a
 * well-formed async caller alone and then during the fuzz. Exits 1 on a 500 or a process exit.
 *
 * FUZZ_REQUESTS (10000), FUZZ_CONCURRENCY (2), FUZZ_SECONDS (bound on the fuzz, 420),
 * FUZZ_SEED (random, printed), FUZZ_BASELINE_CALLS (400). The well-formed caller runs in a
 * process of its own, so the fuzz's own work does not delay its timings.
 */

import { type ChildProcess, fork } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import { type FuzzReport, fuzz, fuzzProject } from "./fuzzer.ts";
import { benchTarget, percentile } from "./harness.ts";

interface CallerOptions {
  url: string;
  host: string;
  key: string;
  /** Calls to make; 0: until told to stop. */
  calls: number;
}

/** Valid async calls one after another; posts each one's milliseconds and its status. */
async function wellFormedCaller(options: CallerOptions) {
  let stopped = false;
  process.on("message", () => {
    stopped = true;
  });
  const dispatcher = new Agent({ connections: 1 });
  const samples: number[] = [];
  const statuses: Record<number, number> = {};
  for (let i = 0; !stopped && (options.calls === 0 || i < options.calls); i++) {
    const started = performance.now();
    const answer = await request(options.url, {
      method: "POST",
      dispatcher,
      headers: {
        host: options.host,
        authorization: `Bearer ${options.key}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ n: i }),
    });
    await answer.body.dump();
    samples.push(performance.now() - started);
    statuses[answer.statusCode] = (statuses[answer.statusCode] ?? 0) + 1;
    // Yield, so the stop message is seen between calls.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await dispatcher.close();
  process.send?.({ samples, statuses }, () => process.disconnect());
}

function runCaller(options: CallerOptions) {
  const child: ChildProcess = fork("bench/fuzz.ts", {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, FUZZ_CALLER: JSON.stringify(options) },
  });
  const result = new Promise<{ samples: number[]; statuses: Record<number, number> }>(
    (resolve, reject) => {
      child.once("message", (m) =>
        resolve(m as { samples: number[]; statuses: Record<number, number> }),
      );
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`the well-formed caller exited ${code}`)));
    },
  );
  return {
    result,
    stop: () => child.send("stop"),
    terminate: () => {
      child.kill();
    },
  };
}

async function main() {
  const count = Number(process.env.FUZZ_REQUESTS ?? 10_000);
  const concurrency = Number(process.env.FUZZ_CONCURRENCY ?? 2);
  const seconds = Number(process.env.FUZZ_SECONDS ?? 420);
  const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const baselineCalls = Number(process.env.FUZZ_BASELINE_CALLS ?? 400);

  // Ctrl-C stops the fuzz; the finally blocks below stop what was started.
  const interrupted = new AbortController();
  process.once("SIGINT", () => interrupted.abort());

  const dir = await mkdtemp(join(tmpdir(), "relay-fuzz-"));
  const ports = await freeStackPorts();
  let stack: Stack | undefined;
  const [targetPort = 0] = await freePorts(1);
  const target = benchTarget(dir, targetPort);
  const callers: ReturnType<typeof runCaller>[] = [];
  try {
    console.log(`Starting a stack in ${dir} (seed ${seed})...`);
    stack = await startStack({
      dir,
      ports,
      output: join(dir, "stack.log"),
      // A trickling body is refused after 2 s rather than the default 30 s, so each slow probe
      // ends within the fuzz's bound.
      env: { RELAY_BODY_TIMEOUT_MS: "2000" },
    });
    await target.start();
    const project = await fuzzProject(
      stack.controlUrl,
      stack.secrets.adminToken,
      `http://127.0.0.1:${targetPort}/sink`,
    );
    const caller = {
      url: `${stack.edgeUrl}/v1/hook`,
      host: `${project.slug}.localhost:${ports.edge}`,
      key: project.key,
    };

    console.log(`Well-formed caller alone: ${baselineCalls} async calls...`);
    const alone = runCaller({ ...caller, calls: baselineCalls });
    callers.push(alone);
    const baseline = await alone.result;

    console.log(`Fuzz: ${count} requests, ${concurrency} at a time, at most ${seconds} s...`);
    const during = runCaller({ ...caller, calls: 0 });
    callers.push(during);
    const report = await fuzz(
      {
        edgePort: ports.edge,
        controlPort: ports.control,
        project,
        adminToken: stack.secrets.adminToken,
      },
      {
        count,
        concurrency,
        seed,
        deadline: Date.now() + seconds * 1000,
        signal: interrupted.signal,
      },
    );
    during.stop();
    const underFuzz = await during.result;
    // Alone again: the spread of the two runs alone is the machine's own noise.
    console.log(`Well-formed caller alone again: ${baselineCalls} async calls...`);
    const after = runCaller({ ...caller, calls: baselineCalls });
    callers.push(after);
    const afterwards = await after.result;

    const exited = Object.entries(stack.processes)
      .filter(([, p]) => p.child?.exitCode !== null || p.child?.signalCode !== null)
      .map(([name, p]) => `${name} (${p.child?.exitCode ?? p.child?.signalCode})`);
    const healthy: Record<string, number> = {};
    for (const [name, url] of [
      ["control", stack.controlUrl],
      ["edge", stack.edgeUrl],
      ["worker", `http://127.0.0.1:${ports.worker}`],
    ] as const) {
      healthy[name] = await request(`${url}/healthz`).then(
        async (r) => {
          await r.body.dump();
          return r.statusCode;
        },
        () => 0,
      );
    }
    const p99Alone = percentile(baseline.samples, 0.99);
    const p99During = percentile(underFuzz.samples, 0.99);
    const summary = {
      seed,
      report,
      processesExited: exited,
      healthz: healthy,
      wellFormed: {
        alone: {
          calls: baseline.samples.length,
          statuses: baseline.statuses,
          p50: percentile(baseline.samples, 0.5),
          p99: p99Alone,
        },
        duringFuzz: {
          calls: underFuzz.samples.length,
          statuses: underFuzz.statuses,
          p50: percentile(underFuzz.samples, 0.5),
          p99: p99During,
        },
        aloneAfter: {
          calls: afterwards.samples.length,
          statuses: afterwards.statuses,
          p50: percentile(afterwards.samples, 0.5),
          p99: percentile(afterwards.samples, 0.99),
        },
        p99Ratio: p99During / p99Alone,
      },
    };
    printSummary(summary);
    await mkdir("bench/results", { recursive: true });
    const file = `bench/results/fuzz-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
    await writeFile(file, JSON.stringify(summary, null, 2));
    console.log(`Written to ${file}.`);
    if (report.internalErrorCount > 0 || exited.length > 0) process.exitCode = 1;
  } finally {
    for (const caller of callers) caller.terminate();
    await target.stop();
    await stack?.stop();
    if (!process.env.FUZZ_KEEP_DIR) await rm(dir, { recursive: true, force: true });
  }
}

function printSummary(s: {
  report: FuzzReport;
  processesExited: string[];
  healthz: Record<string, number>;
  wellFormed: {
    alone: { calls: number; p50: number; p99: number; statuses: Record<number, number> };
    duringFuzz: { calls: number; p50: number; p99: number; statuses: Record<number, number> };
    aloneAfter: { calls: number; p50: number; p99: number; statuses: Record<number, number> };
    p99Ratio: number;
  };
}) {
  const { report, wellFormed } = s;
  const classes = ["2xx", "3xx", "4xx", "5xx", "closed", "reset", "refused", "timeout"];
  const row = (name: string, counts: Record<string, number>) =>
    `${name.padEnd(28)}${classes.map((c) => String(counts[c] ?? 0).padStart(8)).join("")}`;
  console.log(
    [
      "",
      `Sent ${report.sent} malformed requests in ${report.seconds.toFixed(1)} s.`,
      `${"".padEnd(28)}${classes.map((c) => c.padStart(8)).join("")}`,
      row("edge", report.byClass.edge),
      row("control plane", report.byClass.control),
      "",
      ...Object.entries(report.byKind)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([kind, counts]) => row(kind, counts)),
      "",
      `Answers of 5xx: ${JSON.stringify(report.serverErrors)}`,
      `Answers of 500: ${report.internalErrorCount}`,
      ...report.internalErrors.map(
        (f) => `  ${f.component} (${f.kind}): ${JSON.stringify(f.request)}`,
      ),
      `Processes exited: ${s.processesExited.length === 0 ? "none" : s.processesExited.join(", ")}`,
      `/healthz: ${JSON.stringify(s.healthz)}`,
      "",
      "Well-formed async caller (ms):",
      `  alone:        ${wellFormed.alone.calls} calls, p50 ${wellFormed.alone.p50.toFixed(2)}, p99 ${wellFormed.alone.p99.toFixed(2)}, statuses ${JSON.stringify(wellFormed.alone.statuses)}`,
      `  during fuzz:  ${wellFormed.duringFuzz.calls} calls, p50 ${wellFormed.duringFuzz.p50.toFixed(2)}, p99 ${wellFormed.duringFuzz.p99.toFixed(2)}, statuses ${JSON.stringify(wellFormed.duringFuzz.statuses)}`,
      `  alone again:  ${wellFormed.aloneAfter.calls} calls, p50 ${wellFormed.aloneAfter.p50.toFixed(2)}, p99 ${wellFormed.aloneAfter.p99.toFixed(2)}, statuses ${JSON.stringify(wellFormed.aloneAfter.statuses)}`,
      `  p99 ratio:    ${wellFormed.p99Ratio.toFixed(2)} during / first alone (target: within 2)`,
    ].join("\n"),
  );
}

// Last, so every declaration above is initialized before it runs.
const callerOptions = process.env.FUZZ_CALLER;
if (callerOptions) await wellFormedCaller(JSON.parse(callerOptions) as CallerOptions);
else await main();
