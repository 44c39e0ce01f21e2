/**
 * Key verification on the edge's hot path, in one run on this machine:
 * - baseline: SHA-256 of the presented key alone (work every call must do), node:crypto;
 * - cached: what a warm Node edge does per call (hash + cache lookup), no control-plane call;
 * - Web Crypto's digest alone, the edge core's default when an adapter passes none;
 * - uncached: a cold lookup, one ResolveKey RPC to the control plane.
 * Reported as p50/p99 and calls per second; ratios against the baseline. A section of
 * bench/relay.ts, on its stack.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { Agent, fetch as undiciFetch } from "undici";
import { hashSecret } from "../core/secrets.ts";
import type { Stack } from "../dev/stack.ts";
import { connectControlPlane } from "../edge/control.ts";
import { EdgeState } from "../edge/state.ts";
import { sha256 } from "../platform/node-crypto.ts";
import { quick } from "./harness.ts";

/** Calls per in-process measurement, and per control-plane RPC measurement. */
const calls = quick ? 5_000 : 50_000;
const rpcCalls = quick ? 300 : 3_000;

interface Result {
  name: string;
  calls: number;
  p50Us: number;
  p99Us: number;
  callsPerSecond: number;
}

async function measure(name: string, calls: number, run: () => Promise<unknown>): Promise<Result> {
  for (let i = 0; i < Math.min(1000, calls); i++) await run(); // warm up
  const samples = new Float64Array(calls);
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    await run();
    samples[i] = performance.now() - t;
  }
  const elapsedMs = performance.now() - started;
  samples.sort();
  const at = (q: number) => (samples[Math.min(calls - 1, Math.floor(q * calls))] ?? 0) * 1000;
  return {
    name,
    calls,
    p50Us: at(0.5),
    p99Us: at(0.99),
    callsPerSecond: (calls / elapsedMs) * 1000,
  };
}

export async function keyVerification(stack: Stack): Promise<void> {
  const call = async (token: string, path: string, body: unknown) => {
    const response = await fetch(`${stack.controlUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return (await response.json()) as Record<string, string>;
  };
  const project = await call(stack.secrets.adminToken, "/projects", {
    slug: "keys",
    name: "key verification",
  });
  const { plaintext } = await call(project.ownerToken as string, "/projects/keys/keys", {
    name: "bench",
    mode: "live",
  });
  const key = plaintext as string;
  const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 16 });
  const controlPlane = connectControlPlane({
    baseUrl: stack.controlUrl,
    edgeToken: stack.secrets.edgeToken,
    fetch: ((input: string, init?: RequestInit) =>
      undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof fetch,
  });
  const state = new EdgeState({ control: controlPlane, edgeId: "bench", leaseMs: 60_000 });
  await state.start();
  const hash = await hashSecret(key);

  const results = [
    await measure("baseline: SHA-256 of the key (node:crypto)", calls, async () => sha256(key)),
    await measure("cached: hash + edge cache (Node adapter)", calls, () =>
      state.key("keys", sha256(key)),
    ),
    await measure("Web Crypto digest alone (the core's default)", calls, () => hashSecret(key)),
    await measure("uncached: ResolveKey RPC", rpcCalls, () =>
      controlPlane.resolveKey("keys", hash),
    ),
  ];
  await state.stop();

  const baseline = results[0] as Result;
  console.log("\nKey verification on the edge hot path (this machine, one run)\n");
  console.log("| path | calls | p50 (us) | p99 (us) | calls/s | p99 vs baseline |");
  console.log("|---|---|---|---|---|---|");
  for (const r of results) {
    console.log(
      `| ${r.name} | ${r.calls} | ${r.p50Us.toFixed(1)} | ${r.p99Us.toFixed(1)} | ${Math.round(r.callsPerSecond)} | ${(r.p99Us / baseline.p99Us).toFixed(1)}x |`,
    );
  }
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/key-verification.json",
    JSON.stringify({ at: new Date(), results }, null, 2),
  );
  console.log("\nwrote bench/results/key-verification.json");
}
