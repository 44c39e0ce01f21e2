/**
 * What a target's filter adds to a call (`npm run bench:filters`, and last in `npm run bench`):
 * the edge's whole handler in this process (bench/edge-handler.ts), an async endpoint of two
 * targets, with and without a filter on one of them, calls of each kind alternating so that both
 * meet the same machine. A realistic filter (Outpost's docs' kind: a status among two, an amount,
 * a header), on a small JSON body and on a 64 KiB one (a GitHub push's size). The filter's own
 * match, on a body parsed once, beside it.
 */
import { filterInput, matchesFilter } from "../core/filter.ts";
import type { DeliveryTarget, JsonObject } from "../core/model.ts";
import type { EdgeHandler } from "../edge/app.ts";
import { inProcessEdge, KEY, oneChunk } from "./edge-handler.ts";
import { percentile } from "./harness.ts";

const FILTER: JsonObject = {
  body: { status: { $in: ["paid", "shipped"] }, amount: { $gte: 100 } },
  headers: { "x-source": "api" },
};

const target = (name: string, filter?: JsonObject): DeliveryTarget => ({
  id: name,
  name,
  targetUrl: `http://127.0.0.1:9/${name}`,
  deliveryMode: "async",
  timeoutSeconds: 30,
  headers: {},
  ...(filter && { filter }),
});

/** A JSON body of about `bytes`: an order, padded with commits as a push event carries them. */
function orderBody(bytes: number): Uint8Array {
  const commits: JsonObject[] = [];
  const order = { status: "paid", amount: 250, currency: "usd", commits };
  while (JSON.stringify(order).length < bytes) {
    commits.push({
      id: "c".repeat(40),
      message: "m".repeat(200),
      author: { name: "a", email: "e" },
    });
  }
  return new TextEncoder().encode(JSON.stringify(order));
}

/** One async call through the handler; µs to its 202. */
async function callOnce(handler: EdgeHandler, body: Uint8Array): Promise<number> {
  const started = performance.now();
  const headers = new Headers([
    ["host", "acme.localhost:8787"],
    ["authorization", `Bearer ${KEY}`],
    ["content-type", "application/json"],
    ["content-length", String(body.byteLength)],
    ["x-source", "api"],
  ]);
  const answer = await handler(
    {
      method: "POST",
      url: "http://edge.invalid/v1/hook",
      headers,
      signal: new AbortController().signal,
      body: oneChunk(body),
    },
    { remoteAddress: "127.0.0.1" },
  );
  await answer.arrayBuffer();
  if (answer.status !== 202) throw new Error(`answered ${answer.status}`);
  return (performance.now() - started) * 1000;
}

const CALLS = Number(process.env.BENCH_FILTER_CALLS ?? 20_000);
const plain = inProcessEdge([target("a"), target("b")]);
const filtered = inProcessEdge([target("a", FILTER), target("b")]);

console.log(`${CALLS} calls of each kind, alternating; µs per call, in this process`);
console.log(
  "body      | p50 plain | p50 filtered | p99 plain | p99 filtered | p99 added | match alone p99",
);
for (const bytes of [200, 64 * 1024]) {
  const body = orderBody(bytes);
  const times = { plain: [] as number[], filtered: [] as number[] };
  for (let i = 0; i < 2_000; i++) {
    await callOnce(plain, body);
    await callOnce(filtered, body);
  }
  for (let i = 0; i < CALLS; i++) {
    times.plain.push(await callOnce(plain, body));
    times.filtered.push(await callOnce(filtered, body));
  }
  const matches: number[] = [];
  const input = filterInput(body, new Headers([["x-source", "api"]]));
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    if (!matchesFilter(FILTER, input)) throw new Error("the filter should match");
    matches.push((performance.now() - started) * 1000);
  }
  const [p50, p99] = [0.5, 0.99].map((q) => ({
    plain: percentile(times.plain, q),
    filtered: percentile(times.filtered, q),
  }));
  const cells = [
    `${(body.byteLength / 1024).toFixed(1)} KiB`.padEnd(9),
    p50?.plain.toFixed(0).padStart(9),
    p50?.filtered.toFixed(0).padStart(12),
    p99?.plain.toFixed(0).padStart(9),
    p99?.filtered.toFixed(0).padStart(12),
    ((p99?.filtered ?? 0) - (p99?.plain ?? 0)).toFixed(0).padStart(9),
    percentile(matches, 0.99).toFixed(1).padStart(15),
  ];
  console.log(cells.join(" | "));
}
