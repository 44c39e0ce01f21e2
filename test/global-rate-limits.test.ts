/**
 * An endpoint's rate limit holds across edges (docs/api.md "Rate limits"): three edges behind a
 * round-robin caller accept, in any window of T >= 10 s, at most R x T + B (+5%), and nearly that
 * when callers push harder; a changed limit holds on every edge within a second; an edge cut off
 * from the control plane keeps serving at its fallback share (1/N of the limit), never the whole.
 *
 * Calls are paced (open loop) rather than sent as fast as answers come, so the two cores the
 * stack shares stay out of the figures; the bounds are the issue's.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, test } from "vitest";
import { MAX_REPORTED_ENDPOINTS } from "../control/api/edge.ts";
import { freePorts } from "../dev/ports.ts";
import { connectControlPlane } from "../edge/control.ts";
import { connect } from "../store/db.ts";
import { api, extraEdge, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";
import { cuttableProxy } from "./proxies.ts";

const WINDOW_S = 10;
const sink = await targetServer();
const proxy = await cuttableProxy(new URL(stack().controlUrl));
const [bPort = 0, cPort = 0] = await freePorts(2);
const domain = { RELAY_EDGE_DOMAIN: `localhost:${stack().edgePort}` };
const edgeB = extraEdge("edge-rate-b", bPort, domain);
// C reaches the control plane through a proxy the last test cuts; its lease outlasts the cut.
const cId = `edge-rate-c-${process.pid}`;
const edgeC = extraEdge("edge-rate-c", cPort, {
  ...domain,
  RELAY_CONTROL_URL: proxy.url,
  RELAY_EDGE_LEASE_MS: "25000",
  RELAY_EDGE_ID: cId,
});
const edgeAt = (port: number) => ({ edgeUrl: `http://127.0.0.1:${port}`, edgePort: port });
const [a, b, c] = [edgeAt(stack().edgePort), edgeAt(bPort), edgeAt(cPort)];
const sql = connect(stack().databaseUrl, { max: 1 });

let p: Awaited<ReturnType<typeof projectWithEndpoint>>;
const endpointBody = (rateLimit: { requestsPerSecond: number; burst: number }) => ({
  targets: [{ name: "sink", targetUrl: sink.url }],
  rateLimit,
});

beforeAll(async () => {
  await Promise.all([edgeB.start(), edgeC.start()]);
  // The free plan's live pool is unmetered: no call waits on a credit reservation.
  p = await projectWithEndpoint(
    [{ name: "sink", targetUrl: sink.url }],
    { rateLimit: { requestsPerSecond: 10, burst: 20 } },
    "free",
  );
});

afterAll(async () => {
  proxy.restore();
  await Promise.all([edgeB.stop(), edgeC.stop()]);
  // C's lease would otherwise hold later revocations in other files for up to 25 s.
  await sql`delete from edge_leases where edge_id = ${cId}`;
  await Promise.all([sql.end(), proxy.close(), sink.close()]);
});

interface Sent {
  at: number;
  status: number;
}

/** `perSecond` calls a second for `seconds`, each edge in turn, without waiting for answers. */
async function pace(
  edges: { edgeUrl: string; edgePort: number }[],
  perSecond: number,
  seconds: number,
): Promise<Sent[]> {
  const start = performance.now();
  const calls: Promise<Sent>[] = [];
  for (let i = 0; i < perSecond * seconds; i++) {
    const due = start + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const at = performance.now();
    const edge = edges[i % edges.length];
    calls.push(
      relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge }).then((answer) => ({
        at,
        status: answer.status,
      })),
    );
  }
  const sent = await Promise.all(calls);
  const unexpected = sent.filter((s) => s.status !== 202 && s.status !== 429);
  expect(unexpected, "every call is queued or rate limited").toEqual([]);
  return sent;
}

/** Accepted calls in the busiest window of `WINDOW_S`, and in the first one. */
function windows(sent: Sent[]) {
  const accepted = sent.filter((s) => s.status === 202).map((s) => s.at);
  let busiest = 0;
  for (const [i, from] of accepted.entries()) {
    const inWindow = accepted.slice(i).filter((at) => at < from + WINDOW_S * 1000).length;
    busiest = Math.max(busiest, inWindow);
  }
  const first = sent[0]?.at ?? 0;
  return {
    busiest,
    first: accepted.filter((at) => at < first + WINDOW_S * 1000).length,
    total: accepted.length,
  };
}

test("three edges behind a round-robin caller accept the endpoint's limit, not three times it", async () => {
  // 25 calls a second against 10/s with a burst of 20: callers push well past the limit.
  const seen = windows(await pace([a, b, c], 25, 12));
  console.log("global-rate three edges", JSON.stringify(seen));
  const allowed = 10 * WINDOW_S + 20;
  expect(seen.busiest).toBeLessThanOrEqual(allowed * 1.05);
  // The first window starts with full buckets: nearly the whole allowance is taken.
  expect(seen.first).toBeGreaterThanOrEqual(allowed * 0.9);
});

test("a lower limit holds on every edge within a second of its change", async () => {
  const saturating = pace([a, b, c], 25, 13);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const changed = await api(
    p.ownerToken,
    "PUT",
    `${p.base}/lines/v1/endpoints/hook`,
    endpointBody({ requestsPerSecond: 5, burst: 10 }),
  );
  expect(changed.status).toBe(200);
  const effectiveFrom = performance.now() + 1000;
  const after = (await saturating).filter((s) => s.at >= effectiveFrom);
  const seen = windows(after);
  console.log("global-rate after the change", JSON.stringify(seen));
  // The buckets hold at most the new burst when the window starts.
  expect(seen.busiest).toBeLessThanOrEqual((5 * WINDOW_S + 10) * 1.05);
  expect(seen.first).toBeGreaterThanOrEqual(5 * WINDOW_S * 0.9);
});

test("an edge cut off from the control plane falls back to its share of the limit, not the whole", async () => {
  proxy.cut();
  try {
    // Past the last share it was given (3 s), C serves on 1/N of the limit (N = 3 edges).
    await new Promise((resolve) => setTimeout(resolve, 4000));
    const seen = windows(await pace([c], 8, WINDOW_S));
    console.log("global-rate cut-off edge", JSON.stringify(seen));
    const share = (5 * WINDOW_S + 10) / 3;
    expect(seen.total).toBeLessThanOrEqual(share * 1.05);
    expect(seen.total).toBeGreaterThanOrEqual((5 * WINDOW_S * 0.9) / 3);
  } finally {
    proxy.restore();
  }
});

test("a rate-share report past its cap is refused whole", async () => {
  const control = connectControlPlane({
    baseUrl: stack().controlUrl,
    edgeToken: stack().edgeToken,
    fetch,
  });
  const demand = { project: p.slug, line: "v1", path: "hook", accepted: 1, refused: 0 };
  const report = (count: number) =>
    Array.from({ length: count }, () => ({ ...demand, intervalMs: 1000 }));
  const refusal = await control
    .exchangeRateShares("edge-rate-cap", report(MAX_REPORTED_ENDPOINTS + 1))
    .catch((error: unknown) => ConnectError.from(error));
  expect(refusal).toMatchObject({ code: Code.InvalidArgument });
  const answer = await control.exchangeRateShares("edge-rate-cap", report(1));
  expect(answer.fractions).toHaveLength(1);
});
