/**
 * Reservations grouped per project and pool, against the real stack: an edge sends the immediate
 * calls that arrive while one reservation of their pool is answered as one batch, one
 * transaction under one lock of the pool row. Each call must still be decided as if alone: as
 * many accepted as the pool holds credits for, the rest 402 with nothing queued, the pool never
 * promising more than it has, every accepted call delivered and charged once.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { reserveCreditsBatch } from "../store/credits.ts";
import { connect } from "../store/db.ts";
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

/** Under the paid plan's burst of 200, shared by the edges. */
const CALLS = 96;
const FITTING = 29;

const sql = connect(stack().databaseUrl, { max: 2 });
const [secondEdgePort = 0] = await freePorts(1);
const secondEdge = extraEdge("edge-grouped", secondEdgePort);
const sink = await targetServer();
beforeAll(() => secondEdge.start());
afterAll(async () => {
  await Promise.all([secondEdge.stop(), sink.close()]);
  await sql.end();
});

type Pool = { used: number; remaining: number; held: number };
const livePool = async (p: { base: string; ownerToken: string }) =>
  (await api<{ pools: { live: Pool } }>(p.ownerToken, "GET", `${p.base}/usage`)).body.pools.live;

const edges = () => [
  { edgeUrl: stack().edgeUrl, edgePort: stack().edgePort },
  { edgeUrl: `http://127.0.0.1:${secondEdgePort}`, edgePort: secondEdgePort },
];

test(`${CALLS} concurrent calls on two edges and a pool of ${FITTING}: ${FITTING} accepted, delivered and charged once, the rest 402`, async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  await spendDownTo(sql, p.slug, FITTING);

  // The pool is watched while the calls run: what it holds never exceeds what it has left.
  let calling = true;
  const watched: Pool[] = [];
  const watching = (async () => {
    while (calling) watched.push(await livePool(p));
  })();
  const answers = await Promise.all(
    Array.from({ length: CALLS }, (_, n) =>
      relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ n }),
        edge: edges()[n % 2],
      }),
    ),
  );
  calling = false;
  await watching;

  const accepted = answers.filter((a) => a.status === 202).map((a) => a.json().requestId);
  const refused = answers.filter((a) => a.status !== 202);
  expect(accepted).toHaveLength(FITTING);
  for (const answer of refused) {
    expect(answer.status).toBe(402);
    expect(answer.json().error.code).toBe("insufficient_credits");
  }
  for (const pool of watched) {
    expect(pool.used + pool.remaining).toBe(100);
    expect(pool.held).toBeLessThanOrEqual(pool.remaining);
  }

  for (const id of accepted) expect((await finishedLog(p, id)).status).toBe("delivered");
  const deliveredIds = new Set(sink.received.map((r) => r.headers["x-relay-request-id"]));
  expect(accepted.every((id) => deliveredIds.has(id))).toBe(true);
  const charges = await sql<{ requestId: string; charges: number }[]>`
    select request_id, count(*)::int as charges from credit_ledger l join projects p on p.id = l.project_id
    where p.slug = ${p.slug} and l.reason = 'delivery' and l.request_id <> ${`req_setup_${p.slug}`}
    group by request_id`;
  expect(charges.map((c) => c.requestId).sort()).toEqual([...accepted].sort());
  expect(charges.every((c) => c.charges === 1)).toBe(true);
  await eventually(async () => (await livePool(p)).held === 0);
  expect(await livePool(p)).toEqual({ used: 100, remaining: 0, held: 0 });
}, 120_000);

test("a batch decides each call in order: a repeat adds nothing and fits, a call too big for what is left takes nothing", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  await spendDownTo(sql, p.slug, 3);
  const call = (name: string, credits: number) => ({
    requestId: `${p.slug}_${name}`,
    holds: [{ targetId: "t", credits }],
  });
  const batch = (calls: ReturnType<typeof call>[]) =>
    reserveCreditsBatch(sql, { project: p.slug, pool: "live", calls });

  expect(await batch([call("a", 1)])).toEqual([true]);
  expect(await batch([call("a", 1), call("b", 2), call("c", 1), call("b", 2)])).toEqual([
    true,
    true,
    false,
    true,
  ]);
  expect(await livePool(p)).toEqual({ used: 97, remaining: 3, held: 3 });
  const holds = await sql<{ requestId: string; amount: string }[]>`
    select request_id, amount from credit_holds where request_id like ${`${p.slug}_%`}
    order by request_id`;
  expect(holds.map((h) => [h.requestId, Number(h.amount)])).toEqual([
    [`${p.slug}_a`, 1],
    [`${p.slug}_b`, 2],
  ]);
  expect(await batch([call("d", 1)])).toEqual([false]);
});
