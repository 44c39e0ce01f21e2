/**
 * Long and wide ordering lanes on the real stack: a key's waiting requests are rows in Postgres
 * (store/lanes.ts), not a lane workflow's state, so a key of any length the caps allow drains, in
 * order. The targets answer 503 while the requests pile up behind the first, then 200. In
 * `npm test`, one key with 500 waiting on one target and one with 30 waiting on 50 targets;
 * `LONG_LANE_REQUESTS` and `WIDE_LANE_REQUESTS` raise them (a lane workflow holding its queue in
 * its state was terminated near 72,000 waiting request-targets: 1,500 requests on 50 targets).
 */
import { appendFile } from "node:fs/promises";
import { afterAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import {
  eventually,
  grantCredits,
  projectWithEndpoint,
  type Received,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const LONG = Number(process.env.LONG_LANE_REQUESTS ?? 500);
const WIDE = Number(process.env.WIDE_LANE_REQUESTS ?? 30);
const WIDE_TARGETS = 50;

const sql = connect(stack().databaseUrl, { max: 2 });
let open = false;
/** Receipts answered 200, repeats included: the full count is read only once it can be complete. */
let accepted = 0;
const answered = new WeakMap<object, number>();
const gate = await targetServer((received) => {
  const status = open ? 200 : 503;
  if (open) accepted++;
  answered.set(received, status);
  return { status };
});
afterAll(async () => {
  await gate.close();
  await sql.end();
});

/** Per target path, the `n` of each successful receipt, a delivery's repeats dropped. */
function deliveredByPath(received: Received[], since: number): Map<string, number[]> {
  const byPath = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const r of received.slice(since)) {
    const id = String(r.headers["x-relay-delivery-id"]);
    if (seen.has(id) || answered.get(r) !== 200) continue;
    seen.add(id);
    const ns = byPath.get(r.path) ?? [];
    ns.push((JSON.parse(r.body) as { n: number }).n);
    byPath.set(r.path, ns);
  }
  return byPath;
}

/**
 * Sends `n` calls on one key, one after another (so the accept order is the send order); a call
 * refused with a `Retry-After`, by the rate limit (429) or a busy machine's backpressure (503,
 * nothing queued), is sent again after it, as a sender would.
 */
async function sendInOrder(project: { slug: string; key: string }, n: number) {
  for (let i = 1; i <= n; i++) {
    const answer = await relay(project.slug, "/v1/hook", {
      key: project.key,
      body: JSON.stringify({ n: i }),
      headers: { "relay-ordering-key": "one-key" },
    });
    if (answer.status === 429 || answer.status === 503) {
      await new Promise((resolve) =>
        setTimeout(resolve, 1000 * Number(answer.headers["retry-after"] ?? 1)),
      );
      i--;
      continue;
    }
    expect(answer.status, answer.text).toBe(202);
  }
}

/** Sending and draining, at a tenth of the pace seen (23 deliveries a second on one key). */
const timeoutFor = (deliveries: number) => 600_000 + 400 * deliveries;

const oneToN = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

async function drainsInOrder(targets: number, requests: number) {
  open = false;
  const since = gate.received.length;
  const specs = Array.from({ length: targets }, (_, i) => ({
    name: `t${i}`,
    targetUrl: `${gate.url.replace(/\/in$/, "")}/t${i}`,
  }));
  const project = await projectWithEndpoint(specs, { ordering: "fifo" });
  await grantCredits(project.slug, 2 * targets * requests);
  const began = performance.now();
  await sendInOrder(project, requests);
  const sentMs = performance.now() - began;
  // All of them wait in the lane's rows, one queue per target.
  const [waiting] = await sql<{ count: number }[]>`
    select count(*)::int as count from lane_entries
    where lane_id like ${`lane:${project.slug}:%`} and done_at is null`;
  expect(waiting?.count).toBe(targets * requests);
  accepted = 0;
  open = true;
  const openedAt = performance.now();
  await eventually(
    async () => {
      if (accepted < targets * requests) return false;
      const byPath = deliveredByPath(gate.received, since);
      return byPath.size === targets && [...byPath.values()].every((ns) => ns.length >= requests);
    },
    120_000 + 100 * targets * requests,
  );
  const drainedMs = performance.now() - openedAt;
  if (process.env.LANE_FIGURES) {
    const ok = gate.received.slice(since).filter((r) => answered.get(r) === 200);
    const spanS = ((ok.at(-1)?.at ?? 0) - (ok[0]?.at ?? 0)) / 1000;
    const figure =
      `${requests} on ${targets} target(s): sent in ${(sentMs / 1000).toFixed(1)} s, drained ` +
      `${(drainedMs / 1000).toFixed(1)} s after the targets answered; first to last delivery ` +
      `${spanS.toFixed(1)} s (${(ok.length / spanS).toFixed(0)} deliveries/s)`;
    await appendFile(process.env.LANE_FIGURES, `${figure}\n`);
  }
  for (const [path, order] of deliveredByPath(gate.received, since)) {
    expect({ path, order }).toEqual({ path, order: oneToN(requests) });
  }
}

test(
  `one key with ${LONG} requests waiting on one target drains, in order`,
  async () => {
    await drainsInOrder(1, LONG);
  },
  timeoutFor(LONG),
);

test(
  `one key with ${WIDE} requests waiting on ${WIDE_TARGETS} targets drains, in order at each`,
  async () => {
    await drainsInOrder(WIDE_TARGETS, WIDE);
  },
  timeoutFor(WIDE_TARGETS * WIDE),
);
