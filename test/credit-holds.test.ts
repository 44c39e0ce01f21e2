/**
 * Credit holds and the cap on waiting deliveries, against the real stack. A metered call holds
 * its deliveries' credits from its acceptance until each delivery settles, so a pool can never
 * promise more than it has: the calls that do not fit are 402 at the edge and queue nothing, a
 * cancel gives the hold back, a delivery turns its hold into its one charge. Apart from credits,
 * a project's scheduled and held deliveries are capped (409 `limit_exceeded`), free or paid.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { CREDIT_UNIT_BYTES } from "../core/billing.ts";
import { freePorts } from "../dev/ports.ts";
import { connect } from "../store/db.ts";
import { pruneRequestLog } from "../store/retention.ts";
import { edgeCalls } from "./control-metrics.ts";
import {
  api,
  eventually,
  extraEdge,
  finishedLog,
  projectWithEndpoint,
  relay,
  spendDownTo,
  stack,
  targetServer,
} from "./helpers.ts";

type Pool = { used: number; remaining: number | null; held: number | null };
type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const sql = connect(stack().databaseUrl, { max: 2 });
const [secondEdgePort = 0] = await freePorts(1);
const secondEdge = extraEdge("edge-holds", secondEdgePort);
const closers: (() => Promise<void>)[] = [() => sql.end(), () => secondEdge.stop()];
beforeAll(() => secondEdge.start());
afterAll(() => Promise.all(closers.map((close) => close())));

async function target(respond?: Parameters<typeof targetServer>[0]) {
  const server = await targetServer(respond);
  closers.push(server.close);
  return server;
}

const livePool = async (p: Project) =>
  (await api<{ pools: { live: Pool } }>(p.ownerToken, "GET", `${p.base}/usage`)).body.pools.live;

/** The ids of a project's requests in the log (first page of 200). */
const logged = async (p: Project) =>
  (
    await api<{ requests: { requestId: string }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests?limit=200`,
    )
  ).body.requests.map((r) => r.requestId);

const edges = () => [
  { edgeUrl: stack().edgeUrl, edgePort: stack().edgePort },
  { edgeUrl: `http://127.0.0.1:${secondEdgePort}`, edgePort: secondEdgePort },
];

/**
 * For 200 calls at once: no rate limit refuses any, not even an edge's share of it (an edge
 * applies 1/N of a limit it has no share of yet, N being the edges live a moment ago: an earlier
 * file's extra edge may still count).
 */
const UNTHROTTLED = { rateLimit: { requestsPerSecond: 1000, burst: 1000 } };

/**
 * `count` calls, 20 at a time, every other one through the second edge: two edges reserve from
 * the same pool at once.
 */
async function calls(p: Project, count: number, headers: Record<string, string> = {}) {
  const answers: Awaited<ReturnType<typeof relay>>[] = [];
  for (let start = 0; start < count; start += 20) {
    const batch = Array.from({ length: Math.min(20, count - start) }, (_, i) =>
      relay(p.slug, "/v1/hook", {
        key: p.key,
        body: `{"n":${start + i}}`,
        headers,
        edge: edges()[i % 2],
      }),
    );
    answers.push(...(await Promise.all(batch)));
  }
  return answers;
}

function split(answers: Awaited<ReturnType<typeof relay>>[]) {
  const accepted = answers.filter((a) => a.status === 202).map((a) => a.json().requestId as string);
  const refused = answers.filter((a) => a.status !== 202);
  return { accepted, refused };
}

test("a pool of 20 and 200 delayed calls: 20 accepted, 180 refused with 402, a cancel gives back", async () => {
  const never = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: never.url }], UNTHROTTLED);
  await spendDownTo(sql, p.slug, 20);

  const { accepted, refused } = split(await calls(p, 200, { "Relay-Delay": "1h" }));
  expect(accepted).toHaveLength(20);
  expect(refused).toHaveLength(180);
  for (const answer of refused) {
    expect(answer.status).toBe(402);
    expect(answer.json().error.code).toBe("insufficient_credits");
  }
  expect(await livePool(p)).toEqual({ used: 80, remaining: 20, held: 20 });
  // Only the accepted ones were queued: the log opens each as scheduled, and no other.
  await eventually(async () => (await logged(p)).length === 20);
  expect((await logged(p)).sort()).toEqual([...accepted].sort());

  for (const id of accepted) {
    const cancelled = await api(p.ownerToken, "DELETE", `${p.base}/requests/${id}`);
    expect(cancelled.body.status).toBe("cancelled");
  }
  expect(await livePool(p)).toEqual({ used: 80, remaining: 20, held: 0 });
  const again = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: "{}",
    headers: { "Relay-Delay": "1h" },
  });
  expect(again.status).toBe(202);
  expect(never.received).toEqual([]);
}, 120_000);

test("a paused target and a pool of 20: 20 held, the rest 402; resumed, each is charged once and the pool ends at 0", async () => {
  const later = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: later.url }], UNTHROTTLED);
  await spendDownTo(sql, p.slug, 20);
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  expect((await api(p.ownerToken, "POST", `${endpoint}/targets/t/pause`)).status).toBe(200);

  const { accepted, refused } = split(await calls(p, 200));
  expect(accepted).toHaveLength(20);
  expect(refused.map((a) => a.status)).toEqual(Array(180).fill(402));
  expect(await livePool(p)).toEqual({ used: 80, remaining: 20, held: 20 });

  await api(p.ownerToken, "POST", `${endpoint}/targets/t/resume`);
  for (const id of accepted) expect((await finishedLog(p, id, 60_000)).status).toBe("delivered");
  expect(later.received).toHaveLength(20);
  expect(await livePool(p)).toEqual({ used: 100, remaining: 0, held: 0 });
  const broke = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(broke.status).toBe(402);
}, 120_000);

test("a delivered request is charged once, its hold turned into the charge; a sync call too", async () => {
  const ok = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: ok.url }]);
  const sync = await projectWithEndpoint([{ name: "s", targetUrl: ok.url, deliveryMode: "sync" }]);
  // Two credits' worth: a body over 64 KiB.
  const body = `"${"x".repeat(CREDIT_UNIT_BYTES)}"`;
  for (const project of [p, sync]) {
    const answer = await relay(project.slug, "/v1/hook", { key: project.key, body });
    expect(answer.status).toBeLessThan(300);
    const id = answer.headers["x-relay-request-id"] as string;
    expect((await finishedLog(project, id)).status).toBe("delivered");
    expect(await livePool(project)).toEqual({ used: 2, remaining: 98, held: 0 });
  }
});

test("sync calls reserve in the worker, not through the control plane: a pool of 5 answers 5 of 8 calls and refuses 3 with 402, their target never called and nothing of them logged", async () => {
  const ok = await target();
  const p = await projectWithEndpoint([{ name: "s", targetUrl: ok.url, deliveryMode: "sync" }]);
  await spendDownTo(sql, p.slug, 5);
  const reservations = async () =>
    (await edgeCalls("ReserveDeliveries")) + (await edgeCalls("ReserveDeliveriesBatch"));
  const reservationsBefore = await reservations();
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}`, edge: edges()[i % 2] }),
    ),
  );
  expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 402, 402, 402]);
  for (const refused of answers.filter((a) => a.status === 402)) {
    expect(refused.json().error.code).toBe("insufficient_credits");
  }
  expect(ok.received).toHaveLength(5);
  expect(await livePool(p)).toEqual({ used: 100, remaining: 0, held: 0 });
  expect(await reservations()).toBe(reservationsBefore);
  // A refused call opened nothing: the log holds the 5 answered.
  expect(await logged(p)).toHaveLength(5);
});

test("mirror calls at once, their shadows batched: each holds both targets' credits or neither; a pool of 10 answers 5 of 8, both targets reached for those 5 only, all charged and nothing left held", async () => {
  const live = await target();
  const shadow = await target();
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: live.url, deliveryMode: "sync" },
    { name: "shadow", targetUrl: shadow.url },
  ]);
  await spendDownTo(sql, p.slug, 10);
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}`, edge: edges()[i % 2] }),
    ),
  );
  expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 402, 402, 402]);
  expect(live.received.map((r) => r.body).sort()).toEqual(
    answers.flatMap((a, i) => (a.status === 200 ? [`{"n":${i}}`] : [])).sort(),
  );
  await eventually(async () => shadow.received.length >= 5);
  expect(shadow.received.map((r) => r.body).sort()).toEqual(
    live.received.map((r) => r.body).sort(),
  );
  expect(
    await eventually(async () => {
      const pool = await livePool(p);
      return pool.held === 0 && pool;
    }),
  ).toEqual({ used: 100, remaining: 0, held: 0 });
});

test("a stream's credit is held a call ahead, as a hold of its pool, that goes back when the edge stops; the pool still promises no more than it has", async () => {
  const ok = await target();
  const p = await projectWithEndpoint([{ name: "s", targetUrl: ok.url, deliveryMode: "stream" }]);
  await spendDownTo(sql, p.slug, 3);
  const [port = 0] = await freePorts(1);
  const ownEdge = extraEdge("edge-spares", port, { RELAY_ALLOW_PRIVATE_TARGETS: "1" });
  closers.push(() => ownEdge.stop());
  await ownEdge.start();
  const stream = (edge?: { edgeUrl: string; edgePort: number }) =>
    relay(p.slug, "/v1/hook", { key: p.key, body: "{}", ...(edge && { edge }) });

  const first = await stream({ edgeUrl: `http://127.0.0.1:${port}`, edgePort: port });
  expect(first.status).toBe(200);
  await finishedLog(p, first.headers["x-relay-request-id"] as string);
  // Charged its credit; what is held now is the next call's, made ahead by that edge.
  await eventually(async () => (await livePool(p)).held === 1);
  expect(await livePool(p)).toEqual({ used: 98, remaining: 2, held: 1 });
  await ownEdge.stop();
  expect(await livePool(p)).toEqual({ used: 98, remaining: 2, held: 0 });

  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await stream()).status);
  expect(statuses).toEqual([200, 200, 402]);
  expect(ok.received).toHaveLength(3);
  await eventually(async () => (await livePool(p)).used === 100);
  expect(await livePool(p)).toEqual({ used: 100, remaining: 0, held: 0 });
}, 60_000);

test("a delivery cancelled between retries gives its hold back and is not charged", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/gone" }]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(202);
  expect(await livePool(p)).toMatchObject({ remaining: 100, held: 1 });
  await api(p.ownerToken, "DELETE", `${p.base}/requests/${answer.json().requestId}`);
  await eventually(async () => (await livePool(p)).held === 0);
  expect(await livePool(p)).toEqual({ used: 0, remaining: 100, held: 0 });
});

test("a hold whose workflow never started is swept by the daily retention after an hour", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/none" }]);
  // As an edge lost between its reservation and its start leaves it: held, never opened.
  await sql`
    insert into credit_holds (request_id, target_id, project_id, pool, amount, created_at)
    select ${`req_lost_${p.slug}`}, 't', id, 'live', 5, now() - interval '2 hours'
    from projects where slug = ${p.slug}`;
  expect(await livePool(p)).toEqual({ used: 0, remaining: 100, held: 5 });
  const pruned = await pruneRequestLog(sql, new Date(), 30 * 86_400_000);
  expect(pruned.holds).toBeGreaterThanOrEqual(1);
  expect(await livePool(p)).toEqual({ used: 0, remaining: 100, held: 0 });
});

/** Lowers one project's cap on scheduled and held deliveries (an operator's override). */
const capAt = (slug: string, cap: number) =>
  sql`update projects set max_waiting_deliveries = ${cap} where slug = ${slug}`;

test("scheduled deliveries past the project's cap are 409 limit_exceeded, free plan included", async () => {
  const never = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: never.url }], {}, "free");
  await capAt(p.slug, 3);

  const { accepted, refused } = split(await calls(p, 5, { "Relay-Delay": "1h" }));
  expect(accepted).toHaveLength(3);
  for (const answer of refused) {
    expect(answer.status).toBe(409);
    expect(answer.json().error.code).toBe("limit_exceeded");
    expect(answer.json().error.message).toMatch(/3 scheduled and held deliveries/);
  }
  // An immediate call adds nothing that waits: it passes.
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(202);

  await api(p.ownerToken, "DELETE", `${p.base}/requests/${accepted[0]}`);
  expect(split(await calls(p, 1, { "Relay-Delay": "1h" })).accepted).toHaveLength(1);
}, 60_000);

test("held deliveries at the cap make the edges refuse the project's async calls until released", async () => {
  const later = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: later.url }], {}, "free");
  await capAt(p.slug, 3);
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  await api(p.ownerToken, "POST", `${endpoint}/targets/t/pause`);

  const { accepted } = split(await calls(p, 3));
  expect(accepted).toHaveLength(3);
  const circuit = async () =>
    (await api<{ targets: { waiting: number }[] }>(p.ownerToken, "GET", `${endpoint}/circuits`))
      .body.targets[0]?.waiting;
  await eventually(async () => (await circuit()) === 3);
  const full = await eventually(async () => {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    return answer.status === 409 && answer;
  });
  expect(full.json().error.code).toBe("limit_exceeded");

  await api(p.ownerToken, "POST", `${endpoint}/targets/t/resume`);
  for (const id of accepted) await finishedLog(p, id, 60_000);
  await eventually(
    async () => (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status === 202,
  );
}, 120_000);
