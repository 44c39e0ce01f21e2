/**
 * What one stream costs the processes it uses (`npm run bench:stream-cost`): streams through
 * the edge one after another, each a target's answer of one SSE event, and the CPU per stream
 * of the edge (its steps, the call, the answer passed on), the control plane and Postgres (the
 * stream's record, logged and billed, and the credit held for the next call). A stream starts
 * no workflow, so the worker and Temporal take no part. Turns of streams alternate with idle
 * turns as long, whose CPU is taken off, so what the processes do on their own over the same
 * time (polls, leases) is not counted as the streams'. One event per stream keeps the turns
 * short, and what a stream costs whatever its length in the figure.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { benchStack, quick, runBench } from "./harness.ts";
import { stackCpu } from "./publish.ts";

const rounds = quick ? 2 : 6;
const streamsPerTurn = quick ? 20 : 200;
/** After a turn's last stream, so the work it left (its record, the next hold) is its own. */
const SETTLE_MS = 500;
const USED_BY_A_STREAM = ["edge", "control", "postgres"] as const;
type Used = (typeof USED_BY_A_STREAM)[number];
type CpuMs = Record<Used, number>;

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-stream-cost-"));
  const { stack, slug, key } = await benchStack(cleanup, dir, {}, { BENCH_CHUNKS: "1" });
  const cpuNow = stackCpu(stack);
  const stream = async () => {
    const answer = await request(`${stack.edgeUrl}/v1/stream`, {
      method: "POST",
      headers: { host: `${slug}.localhost`, authorization: `Bearer ${key}` },
    });
    if (answer.statusCode !== 200) throw new Error(`the edge answered ${answer.statusCode}`);
    await answer.body.arrayBuffer();
  };
  for (let i = 0; i < 20; i++) await stream(); // warm-up: the key, the endpoint, the first hold

  const spent = { streams: { cpu: zeroCpu(), ms: 0 }, idle: { cpu: zeroCpu(), ms: 0 } };
  const turn = async (kind: keyof typeof spent, run: () => Promise<void>) => {
    const from = await cpuNow();
    const startedAt = performance.now();
    await run();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const to = await cpuNow();
    spent[kind].ms += performance.now() - startedAt;
    for (const name of USED_BY_A_STREAM) spent[kind].cpu[name] += to[name] - from[name];
  };
  let streamedMs = 0;
  for (let round = 0; round < rounds; round++) {
    await turn("streams", async () => {
      const startedAt = performance.now();
      for (let i = 0; i < streamsPerTurn; i++) await stream();
      streamedMs = performance.now() - startedAt;
    });
    await turn("idle", () => new Promise((resolve) => setTimeout(resolve, streamedMs)));
  }

  const streams = rounds * streamsPerTurn;
  const { idle } = spent;
  const perStream = Object.fromEntries(
    USED_BY_A_STREAM.map((name) => [
      name,
      (spent.streams.cpu[name] - (idle.cpu[name] / idle.ms) * spent.streams.ms) / streams,
    ]),
  ) as CpuMs;
  const total = USED_BY_A_STREAM.reduce((sum, name) => sum + perStream[name], 0);
  const idlePerSecond = USED_BY_A_STREAM.map(
    (name) => `${name} ${((idle.cpu[name] / idle.ms) * 1000).toFixed(0)}`,
  );
  console.log(
    `\nstream cost: ${rounds} rounds of ${streamsPerTurn} one-event streams, one after another, ${(spent.streams.ms / streams) | 0 || "<1"} ms each with the settling`,
  );
  console.log(
    `CPU ms per stream (/proc's 10 ms ticks), less each process's idle CPU over the same time (idle: ${idlePerSecond.join(", ")} ms/s)\n`,
  );
  console.log(`| ${USED_BY_A_STREAM.join(" | ")} | the three |`);
  console.log(`|${"---|".repeat(USED_BY_A_STREAM.length + 1)}`);
  console.log(
    `| ${USED_BY_A_STREAM.map((name) => perStream[name].toFixed(2)).join(" | ")} | ${total.toFixed(2)} |`,
  );
});

function zeroCpu(): CpuMs {
  return Object.fromEntries(USED_BY_A_STREAM.map((name) => [name, 0])) as CpuMs;
}
