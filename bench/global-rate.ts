/**
 * An endpoint's rate limit across three edges (docs/benchmarks.md "Rate limits across edges"):
 * a stack, two more edges, and a caller pacing calls (open loop) to the three in turn, past the
 * limit. Prints the calls accepted in each second and in each window of BENCH_RATE_WINDOW_S,
 * beside the bound R x T + B (the first window starts with full buckets; later ones find them
 * empty, so R x T is what they should reach).
 *
 *   BENCH_RATE_LIMIT (20/s, burst twice it), BENCH_RATE_CALLS (calls a second: 2.5x the limit),
 *   BENCH_RATE_SECONDS (60; BENCH_QUICK=1: 20), BENCH_RATE_WINDOW_S (10)
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { benchStack, quick, runBench, unlimitProject } from "./harness.ts";

const rate = Number(process.env.BENCH_RATE_LIMIT ?? 20);
const burst = 2 * rate;
const callsPerSecond = Number(process.env.BENCH_RATE_CALLS ?? rate * 2.5);
const seconds = Number(process.env.BENCH_RATE_SECONDS ?? (quick ? 20 : 60));
const windowS = Number(process.env.BENCH_RATE_WINDOW_S ?? 10);

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-rate-"));
  const { stack, ports, targetPort } = await benchStack(cleanup, dir);
  const extraPorts = await freePorts(2);
  for (const [i, port] of extraPorts.entries()) {
    const edge = new ManagedProcess(
      {
        name: `edge-${i + 2}`,
        entry: "edge/main.ts",
        readyLine: "edge listening",
        env: {
          RELAY_EDGE_PORT: String(port),
          RELAY_EDGE_DOMAIN: `localhost:${ports.edge}`,
          RELAY_CONTROL_URL: stack.controlUrl,
          RELAY_EDGE_TOKEN: stack.secrets.edgeToken,
          TEMPORAL_HTTP_ADDRESS: stack.temporal.httpAddress,
          RELAY_ALLOW_PRIVATE_TARGETS: "1",
        },
      },
      logFile(join(dir, `edge-${i + 2}.log`)),
    );
    cleanup.add(() => edge.stop());
    await edge.start();
  }
  const edgePorts = [ports.edge, ...extraPorts];

  // A free-plan project: its live pool is unmetered, so no call waits on a credit reservation.
  const call = async (token: string, path: string, body: unknown) => {
    const response = await request(`${stack.controlUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = (await response.body.json()) as Record<string, string>;
    if (response.statusCode >= 300) throw new Error(`${path}: ${JSON.stringify(answer)}`);
    return answer;
  };
  const slug = "limited";
  const { ownerToken = "" } = await call(stack.secrets.adminToken, "/projects", {
    slug,
    name: slug,
    plan: "free",
  });
  // The endpoint's limit is what this bench measures, not the project's.
  await unlimitProject(stack.controlUrl, stack.secrets.adminToken, slug);
  await call(ownerToken, `/projects/${slug}/lines`, { key: "v1" });
  await call(ownerToken, `/projects/${slug}/lines/v1/endpoints`, {
    path: "hook",
    targets: [{ name: "sink", targetUrl: `http://127.0.0.1:${targetPort}/sink` }],
    rateLimit: { requestsPerSecond: rate, burst },
  });
  const { plaintext: key } = await call(ownerToken, `/projects/${slug}/keys`, {
    name: "bench",
    mode: "live",
  });

  console.log(
    `3 edges, limit ${rate}/s burst ${burst}, ${callsPerSecond} calls/s round robin for ${seconds} s`,
  );
  const start = performance.now();
  const calls: Promise<{ at: number; edge: number; status: number }>[] = [];
  for (let i = 0; i < callsPerSecond * seconds; i++) {
    const wait = start + (i * 1000) / callsPerSecond - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const at = performance.now() - start;
    const edge = i % edgePorts.length;
    calls.push(
      request(`http://127.0.0.1:${edgePorts[edge]}/v1/hook`, {
        method: "POST",
        headers: {
          host: `${slug}.localhost:${ports.edge}`,
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
        },
        body: "{}",
      }).then(async (response) => {
        await response.body.dump();
        return { at, edge, status: response.statusCode };
      }),
    );
  }
  const answered = await Promise.all(calls);
  const statuses = new Map<number, number>();
  for (const { status } of answered) statuses.set(status, (statuses.get(status) ?? 0) + 1);
  const accepted = answered.filter((a) => a.status === 202);
  const perSecond = Array.from({ length: seconds }, (_, s) =>
    accepted.filter((a) => Math.floor(a.at / 1000) === s),
  );
  console.log(`answers: ${JSON.stringify(Object.fromEntries(statuses))}`);
  console.log("second  accepted  (per edge)");
  for (const [s, inSecond] of perSecond.entries()) {
    const byEdge = edgePorts.map((_, e) => inSecond.filter((a) => a.edge === e).length);
    console.log(`${String(s).padStart(6)}  ${String(inSecond.length).padStart(8)}  (${byEdge})`);
  }
  const bound = rate * windowS + burst;
  let busiest = 0;
  console.log(
    `window (${windowS} s)  accepted  of R x T + B = ${bound}  of R x T = ${rate * windowS}`,
  );
  for (let from = 0; from + windowS <= seconds; from++) {
    const inWindow = perSecond.slice(from, from + windowS).reduce((n, s) => n + s.length, 0);
    busiest = Math.max(busiest, inWindow);
    const ofBound = ((100 * inWindow) / bound).toFixed(1);
    const ofRate = ((100 * inWindow) / (rate * windowS)).toFixed(1);
    console.log(
      `${String(`${from}-${from + windowS}`).padStart(14)}  ${String(inWindow).padStart(8)}  ${ofBound.padStart(6)}%  ${ofRate.padStart(6)}%`,
    );
  }
  console.log(
    `busiest window ${busiest} (${((100 * busiest) / bound).toFixed(1)}% of ${bound}); ` +
      `whole run ${accepted.length} of ${rate * seconds + burst} (R x ${seconds} s + B)`,
  );
});
