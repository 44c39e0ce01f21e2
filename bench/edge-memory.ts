/**
 * Reading a running edge's memory from outside, with no code of the edge's own: its RSS from
 * /proc, its queue's backlog from /metrics, and heap snapshots through Node's
 * --heapsnapshot-signal on a twin started for them.
 */
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "undici";
import { logFile, ManagedProcess, waitFor } from "../dev/processes.ts";
import type { Stack } from "../dev/stack.ts";

/**
 * A second edge, like the stack's, that writes its heap to `snapshots` on SIGUSR2 (Node's
 * --heapsnapshot-signal: no code of the edge's own). Writing a snapshot leaves hundreds of MiB
 * freed but resident in the process, where later native growth would hide: RSS is read on the
 * stack's edge, never snapshotted, and the heap on this one, under the same load.
 */
export function snapshottedEdge(stack: Stack, port: number, snapshots: string, dir: string) {
  return new ManagedProcess(
    {
      name: "edge-snapshotted",
      entry: "edge/main.ts",
      readyLine: "edge listening",
      env: {
        RELAY_EDGE_PORT: String(port),
        RELAY_CONTROL_URL: stack.controlUrl,
        RELAY_EDGE_TOKEN: stack.secrets.edgeToken,
        TEMPORAL_HTTP_ADDRESS: stack.temporal.httpAddress,
        RELAY_ALLOW_PRIVATE_TARGETS: "1",
        NODE_OPTIONS: [
          process.env.NODE_OPTIONS ?? "",
          "--heapsnapshot-signal=SIGUSR2",
          `--diagnostic-dir=${snapshots}`,
        ].join(" "),
      },
    },
    logFile(join(dir, "edge-snapshotted.log")),
  );
}

export function pidOf(managed: ManagedProcess): number {
  const pid = managed.child?.pid;
  if (pid === undefined) throw new Error(`${managed.spec.name} has no process`);
  return pid;
}

/**
 * Writes the edge's heap to `dir` (Node's --heapsnapshot-signal) and answers the file. Twice,
 * keeping the second: the first one's collection finds what is garbage, but what a
 * FinalizationRegistry holds for it (undici's fetch keeps each call's signal there) is let go
 * only by callbacks that run after that snapshot.
 */
export async function heapSnapshot(pid: number, dir: string, edgeUrl: string): Promise<string> {
  const collecting = await writeSnapshot(pid, dir, edgeUrl);
  await rm(collecting);
  await sleep(1000);
  return writeSnapshot(pid, dir, edgeUrl);
}

async function writeSnapshot(pid: number, dir: string, edgeUrl: string): Promise<string> {
  const before = new Set(await readdir(dir));
  process.kill(pid, "SIGUSR2");
  let file: string | undefined;
  await waitFor(async () => {
    file = (await readdir(dir)).find((f) => f.endsWith(".heapsnapshot") && !before.has(f));
    return file !== undefined;
  }, 120_000);
  // The edge writes it on its event loop, in one go: once it answers again, the file is whole.
  await getText(`${edgeUrl}/healthz`);
  return join(dir, file as string);
}

export interface Sample {
  seconds: number;
  rssKb: number;
  /** How long the oldest task in Relay's queue has waited (the edge's gauge): steady or not. */
  backlogSeconds: number | null;
}

export async function sample(pid: number, edgeUrl: string, seconds: number): Promise<Sample> {
  const metrics = await getText(`${edgeUrl}/metrics`).catch(() => "");
  const backlog = /^relay_edge_task_queue_backlog_age_seconds (\S+)$/m.exec(metrics)?.[1];
  return {
    seconds: Math.round(seconds),
    rssKb: await rssKb(pid),
    backlogSeconds: backlog === undefined ? null : Number(backlog),
  };
}

/**
 * A GET on a connection of its own: a pooled one left idle while the edge was busy writing a
 * snapshot may be closed by the edge just as it is reused (ECONNRESET).
 */
async function getText(url: string): Promise<string> {
  const { origin, pathname } = new URL(url);
  const client = new Client(origin, { headersTimeout: 300_000 });
  try {
    const answer = await client.request({ method: "GET", path: pathname });
    return await answer.body.text();
  } finally {
    await client.close();
  }
}

export async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

/** Least-squares slope of RSS over the run, in KiB a minute: a trend, beside two end points. */
export function slopePerMinute(samples: Sample[]): number {
  if (samples.length < 2) return 0;
  const meanT = samples.reduce((sum, s) => sum + s.seconds, 0) / samples.length;
  const meanR = samples.reduce((sum, s) => sum + s.rssKb, 0) / samples.length;
  let covariance = 0;
  let variance = 0;
  for (const s of samples) {
    covariance += (s.seconds - meanT) * (s.rssKb - meanR);
    variance += (s.seconds - meanT) ** 2;
  }
  return (covariance / variance) * 60;
}
