/**
 * `npm run bench:startup`: each process's start, from the build (`node dist/cli/relay.js <cmd>`,
 * `npm run build` first) against the same entry from source (`node --import tsx cli/relay.ts
 * <cmd>`), in the same run, beside one stack (Postgres, Temporal, a control plane for the edge).
 * Per start: the time from spawn to the process's ready line; the CPU time the process used by
 * then (user and system, all its threads: on this shared 2-core machine the wall time swings with
 * its load, the CPU time much less); and its resident memory (VmRSS) once it has been ready for
 * SETTLE_MS. Every process runs alone (the one before it stopped), and
 * the two forms take turns in alternating order each round, so the machine's noise falls on both.
 * Prints the medians (and the range) per process and form; writes bench/results/startup.json.
 *
 * BENCH_STARTUP_RUNS (7; 3 with BENCH_QUICK=1): starts per process and form.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { build, relayBin } from "../dev/build.ts";
import { freePorts } from "../dev/ports.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { freeStackPorts, startStack } from "../dev/stack.ts";
import { percentile, quick, runBench, stackEnv } from "./harness.ts";

const runs = Number(process.env.BENCH_STARTUP_RUNS ?? (quick ? 3 : 7));
/** After its ready line, a process settles (connections, first polls) before RSS is read. */
const SETTLE_MS = 2000;

const processes = [
  { command: "control", readyLine: "control plane listening", port: "RELAY_CONTROL_PORT" },
  { command: "worker", readyLine: "worker polling", port: "RELAY_WORKER_PORT" },
  { command: "edge", readyLine: "edge listening", port: "RELAY_EDGE_PORT" },
] as const;
const forms = {
  build: (command: string) => [process.execPath, relayBin, command],
  tsx: (command: string) => [process.execPath, "--import", "tsx", "cli/relay.ts", command],
};
type Form = keyof typeof forms;

interface Start {
  process: string;
  form: Form;
  readyMs: number;
  cpuMs: number;
  rssMiB: number;
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** User and system CPU time of process `pid` so far (/proc/<pid>/stat, in clock ticks of 10 ms). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // The fields after the command name (which may hold spaces), from the third on.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

await runBench(async (cleanup) => {
  console.log(`build: ${await build()}`);
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-startup-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const starting = startStack({
    dir,
    ports: await freeStackPorts(),
    output: join(dir, "stack.log"),
  });
  cleanup.add(async () => (await starting).stop());
  const stack = await starting;
  const env = { ...stackEnv(stack), RELAY_CONTROL_URL: stack.controlUrl };
  const output = logFile(join(dir, "starts.log"));
  const starts: Start[] = [];
  for (let round = 0; round < runs; round++) {
    const order: Form[] = round % 2 === 0 ? ["build", "tsx"] : ["tsx", "build"];
    for (const { command, readyLine, port } of processes) {
      for (const form of order) {
        const [listen = 0] = await freePorts(1);
        const managed = new ManagedProcess(
          {
            name: `${command}-${form}`,
            command: forms[form](command),
            readyLine,
            env: { ...env, [port]: String(listen) },
          },
          output,
        );
        cleanup.add(() => managed.stop());
        const began = performance.now();
        await managed.start();
        const readyMs = performance.now() - began;
        const pid = managed.child?.pid ?? 0;
        const cpu = await cpuMs(pid);
        await sleep(SETTLE_MS);
        const rss = await rssMiB(pid);
        await managed.stop();
        starts.push({ process: command, form, readyMs, cpuMs: cpu, rssMiB: rss });
        console.log(
          `round ${round + 1}/${runs} ${command} (${form}): ready in ${readyMs.toFixed(0)} ms, ${cpu} ms CPU, ${rss.toFixed(1)} MiB`,
        );
      }
    }
  }

  const rows = processes.flatMap(({ command }) =>
    (Object.keys(forms) as Form[]).map((form) => {
      const mine = starts.filter((s) => s.process === command && s.form === form);
      const ready = mine.map((s) => s.readyMs);
      const rss = mine.map((s) => s.rssMiB);
      const cpu = mine.map((s) => s.cpuMs);
      return {
        process: command,
        form,
        readyMedianMs: Math.round(percentile(ready, 0.5)),
        readyMinMs: Math.round(Math.min(...ready)),
        readyMaxMs: Math.round(Math.max(...ready)),
        cpuMedianMs: percentile(cpu, 0.5),
        cpuMinMs: Math.min(...cpu),
        cpuMaxMs: Math.max(...cpu),
        rssMedianMiB: Number(percentile(rss, 0.5).toFixed(1)),
        rssMinMiB: Number(Math.min(...rss).toFixed(1)),
        rssMaxMiB: Number(Math.max(...rss).toFixed(1)),
      };
    }),
  );
  const load = (await readFile("/proc/loadavg", "utf8")).split(" ").slice(0, 3).join(" ");
  console.log(
    `\n${runs} starts per process and form (median, min-max); load average now ${load}:\n`,
  );
  console.log("| Process | Form | Start to ready line | CPU by then | Resident memory |");
  console.log("|---|---|---|---|---|");
  for (const row of rows) {
    console.log(
      `| ${row.process} | ${row.form} | ${row.readyMedianMs} ms (${row.readyMinMs}-${row.readyMaxMs}) | ${row.cpuMedianMs} ms (${row.cpuMinMs}-${row.cpuMaxMs}) | ${row.rssMedianMiB} MiB (${row.rssMinMiB}-${row.rssMaxMiB}) |`,
    );
  }
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/startup.json",
    `${JSON.stringify({ at: new Date().toISOString(), load, runs, settleMs: SETTLE_MS, rows, starts }, null, 2)}\n`,
  );
});
