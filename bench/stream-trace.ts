/**
 * Where a stream's first byte waits inside the edge (`npm run bench:stream-trace`; Linux, with
 * strace and the right to trace). First the edge's handler alone in this process, against the
 * web-standard shape with no steps (bench/edge-handler.ts), back to back and with the process idle
 * between calls. Then one-event streams through the edge and a bare Node proxy, some milliseconds
 * apart, untraced for the time to first byte the caller sees, then with `strace` on each process's
 * main thread. Between reading the caller's request and writing the call to the target, and
 * between reading the target's answer and writing it on, neither process makes a system call:
 * those two stretches are its own CPU on the way to the first byte, timed by strace's timestamps,
 * apart from the network, the target and the client.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import type { ManagedProcess } from "../dev/processes.ts";
import { handlerCost } from "./edge-handler.ts";
import {
  benchNodeProxy,
  benchStack,
  percentile,
  quick,
  requireTools,
  runBench,
} from "./harness.ts";

const streams = Number(process.env.BENCH_STREAM_RUNS ?? (quick ? 20 : 150));
/**
 * Between streams (BENCH_STREAM_GAP_MS): each starts on an idle process, as a caller's lone
 * stream does. With less, the edge's work after one stream (its record, the next stream's hold)
 * meets the next one's way to its first byte.
 */
const GAP_MS = Number(process.env.BENCH_STREAM_GAP_MS ?? 30);

interface Path {
  url: string;
  headers: Record<string, string>;
}

await runBench(async (cleanup) => {
  await requireTools([{ command: "strace", debianPackage: "strace" }]);
  const handler = await handlerCost(quick ? 50 : 300, [0, 1, 5, 30]);
  console.log(
    "\nthe edge's handler alone, in this process: a stream call to a target answering at once, call to first chunk (p50 µs)\n",
  );
  console.log("| idle between calls | edge handler | web-standard shape, no steps | the steps |");
  console.log("|---|---|---|---|");
  for (const { gapMs, edgeUs, noStepsUs } of handler) {
    const idle = gapMs === 0 ? "none (back to back)" : `${gapMs} ms`;
    console.log(
      `| ${idle} | ${edgeUs.toFixed(0)} | ${noStepsUs.toFixed(0)} | ${(edgeUs - noStepsUs).toFixed(0)} |`,
    );
  }
  const dir = await mkdtemp(join(tmpdir(), "relay-stream-trace-"));
  const { stack, slug, key, targetPort } = await benchStack(
    cleanup,
    dir,
    {},
    { BENCH_CHUNKS: "1" },
  );
  const proxy = await benchNodeProxy(cleanup, dir, targetPort);
  const paths = {
    direct: { url: `http://127.0.0.1:${targetPort}/stream`, headers: {} },
    "bare Node proxy": { url: `${proxy.url}/stream`, headers: {} },
    edge: {
      url: `${stack.edgeUrl}/v1/stream`,
      headers: { host: `${slug}.localhost`, authorization: `Bearer ${key}` },
    },
  } satisfies Record<string, Path>;

  // Untraced, the paths in turn: what the caller sees.
  const firstByte = new Map<string, number[]>(Object.keys(paths).map((name) => [name, []]));
  for (let run = -10; run < streams; run++) {
    for (const [name, path] of Object.entries(paths)) {
      await pause();
      const ms = await streamOnce(path);
      if (run >= 0) firstByte.get(name)?.push(ms);
    }
  }
  const direct = percentile(firstByte.get("direct") ?? [], 0.5);

  const traced: [string, Path, ManagedProcess][] = [
    ["bare Node proxy", paths["bare Node proxy"], proxy.process],
    ["edge", paths.edge, stack.processes.edge],
  ];
  const rows: string[] = [];
  const measured: Record<string, Stretches & { added: number }> = {};
  for (const [name, path, managed] of traced) {
    const pid = managed.child?.pid;
    if (pid === undefined) throw new Error(`${name} is not running`);
    const stretches = await traceStreams(dir, pid, path);
    const added = percentile(firstByte.get(name) ?? [], 0.5) - direct;
    measured[name] = {
      added,
      toCall: median(stretches.toCall),
      toAnswer: median(stretches.toAnswer),
    };
    rows.push(
      `| ${name} | ${f(added)} | ${quartiles(stretches.toCall)} | ${quartiles(stretches.toAnswer)} | ${stretches.toCall.length} |`,
    );
  }
  const [bare, edge] = [measured["bare Node proxy"], measured.edge];
  if (bare && edge) {
    rows.push(
      `| edge less the proxy | ${f(edge.added - bare.added)} | ${f(edge.toCall - bare.toCall)} | ${f(edge.toAnswer - bare.toAnswer)} | |`,
    );
  }
  console.log(
    `\nstream trace: one-event streams ${GAP_MS} ms apart; time to first byte over ${streams} untraced streams per path (direct p50 ${f(direct)} ms), then each process's CPU stretches on the way to the first byte under strace (ms, p50 and p25-p75)\n`,
  );
  console.log(
    "| path | added TTFB p50 | request read to call written | answer read to answer written | streams traced |",
  );
  console.log("|---|---|---|---|---|");
  for (const row of rows) console.log(row);
});

function pause(): Promise<unknown> {
  return GAP_MS > 0 ? sleep(GAP_MS) : Promise.resolve();
}

/** One stream's time to its first byte, its body read to the end. */
async function streamOnce(path: Path): Promise<number> {
  const started = performance.now();
  const answer = await request(path.url, { method: "POST", headers: path.headers, body: "{}" });
  if (answer.statusCode !== 200) throw new Error(`${path.url} answered ${answer.statusCode}`);
  let firstByteMs = Number.NaN;
  for await (const _ of answer.body) {
    if (Number.isNaN(firstByteMs)) firstByteMs = performance.now() - started;
  }
  return firstByteMs;
}

interface Stretches<T = number> {
  /** From the caller's request read to the call written to the target. */
  toCall: T;
  /** From the target's answer read to the answer written to the caller. */
  toAnswer: T;
}

/** `streams` streams through `path` while strace follows the main thread of process `pid`. */
async function traceStreams(dir: string, pid: number, path: Path): Promise<Stretches<number[]>> {
  for (let i = 0; i < 20; i++) await streamOnce(path);
  const output = join(dir, `${pid}.strace`);
  const strace = spawn(
    "strace",
    ["-tt", "-e", "trace=read,write,writev", "-o", output, "-p", String(pid)],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const exited = new Promise((resolve) => strace.once("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    strace.stderr.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("attached")) resolve();
    });
    strace.once("exit", (code) => reject(new Error(`strace ended (${code}): may it trace?`)));
  });
  try {
    for (let i = 0; i < streams; i++) {
      await pause();
      await streamOnce(path);
    }
    await sleep(200);
  } finally {
    // Detached even when a stream failed: the traced process goes on as it was.
    strace.kill("SIGINT");
    await exited;
  }
  return stretchesOf(await readFile(output, "utf8"));
}

/**
 * The two stretches of each stream in a trace: the caller's request read (`read` of a POST),
 * the call written (`writev` of a POST to the target's /stream), the answer read on that call's
 * descriptor, and the answer written on the request's.
 */
function stretchesOf(trace: string): Stretches<number[]> {
  const found: Stretches<number[]> = { toCall: [], toAnswer: [] };
  let open: { at: number; inbound: string; outbound?: string; answerAt?: number } | null = null;
  for (const line of trace.split("\n")) {
    const call = /^(\d+):(\d+):([\d.]+) (read|write|writev)\((\d+), \[?(?:\{iov_base=)?"(.*)/.exec(
      line,
    );
    if (!call) continue;
    const [, h, m, s, syscall, fd = "", data = ""] = call;
    const at = (Number(h) * 3600 + Number(m) * 60 + Number(s)) * 1000;
    if (syscall === "read" && data.startsWith("POST /")) {
      open = { at, inbound: fd };
    } else if (open && !open.outbound && syscall === "writev" && data.startsWith("POST /stream")) {
      found.toCall.push(at - open.at);
      open.outbound = fd;
    } else if (open?.outbound === fd && syscall === "read" && data.startsWith("HTTP/1.1 ")) {
      open.answerAt = at;
    } else if (open?.answerAt && open.inbound === fd && data.startsWith("HTTP/1.1 ")) {
      found.toAnswer.push(at - open.answerAt);
      open = null;
    }
  }
  return found;
}

function f(n: number | undefined): string {
  return (n ?? Number.NaN).toFixed(2);
}

function median(values: number[]): number {
  return percentile(values, 0.5);
}

function quartiles(values: number[]): string {
  return `${f(median(values))} (${f(percentile(values, 0.25))}-${f(percentile(values, 0.75))})`;
}
