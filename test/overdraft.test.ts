/**
 * Concurrent calls and charges on a small pool: a burst takes only what the pool holds (each call
 * reserves its credits first), and the charge that takes a pool to zero or below must be seen,
 * whatever the interleaving, so the edges refuse what comes after (402) without asking.
 */
import { afterAll, expect, test } from "vitest";
import { chargeDelivery } from "../store/credits.ts";
import { connect } from "../store/db.ts";
import {
  api,
  finishedLog,
  newProject,
  projectWithEndpoint,
  relay,
  spendDownTo,
  stack,
  targetServer,
} from "./helpers.ts";

const BURST = 20;
const ROUNDS = 2;
const sink = await targetServer();
const sql = connect(stack().databaseUrl, { max: BURST + 2 });
afterAll(async () => {
  await sink.close();
  await sql.end();
});

const remaining = async (p: { base: string; ownerToken: string }) =>
  (await api<{ pools: { live: { remaining: number } } }>(p.ownerToken, "GET", `${p.base}/usage`))
    .body.pools.live.remaining;

/** Lets the edge apply the change a finished charge recorded (it arrives within milliseconds). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 1000));

test(`a pool of 2 and bursts of ${BURST} concurrent calls: 2 accepted, never overdrawn, then 402`, async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  await spendDownTo(sql, p.slug, 2);
  expect(await remaining(p)).toBe(2);

  const burst = () =>
    Promise.all(
      Array.from({ length: BURST }, (_, n) =>
        relay(p.slug, "/v1/hook", { key: p.key, body: JSON.stringify({ n }) }),
      ),
    );
  for (let round = 0; round < ROUNDS; round++) {
    await settle();
    const first = await burst();
    const accepted = first.filter((a) => a.status === 202);
    expect(accepted).toHaveLength(2);
    await Promise.all(accepted.map((answer) => finishedLog(p, answer.json().requestId)));
    const left = await remaining(p);
    expect(left).toBe(0);

    await settle();
    const after = await burst();
    expect(after.map((a) => a.status)).toEqual(Array(BURST).fill(402));
    expect(await remaining(p)).toBe(left);

    // Back to 2 for the next round.
    const topUp = await api(stack().adminToken, "POST", `${p.base}/credits`, {
      pool: "live",
      amount: 2 - left,
    });
    expect(topUp.status).toBe(200);
  }
});

test(`${BURST} charges at once on a pool of 2: the one that empties it tells the edges, once`, async () => {
  const p = await newProject("paid");
  await spendDownTo(sql, p.slug, 2);
  expect(await remaining({ base: `/projects/${p.slug}`, ownerToken: p.ownerToken })).toBe(2);
  const [head] = await sql<{ head: string }[]>`select max(sequence) as head from changes`;

  // The ledger is held until every charge waits at its insert, so they all go at once.
  let release = () => {};
  const held = sql.begin(async (tx) => {
    await tx`lock table credit_ledger in share mode`;
    await new Promise<void>((resolve) => {
      release = resolve;
    });
  });
  const charges = Array.from({ length: BURST }, (_, n) =>
    sql.begin((tx) =>
      chargeDelivery(tx, {
        project: p.slug,
        pool: "live",
        requestId: `req_${p.slug}_${n}`,
        targetId: "t",
        bytes: 1,
      }),
    ),
  );
  for (;;) {
    const [waiting] = await sql<{ count: number }[]>`
      select count(*)::int as count from pg_locks
      where not granted and relation = 'credit_ledger'::regclass`;
    if ((waiting?.count ?? 0) >= BURST) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  release();
  await held;
  await Promise.all(charges);

  expect(await remaining({ base: `/projects/${p.slug}`, ownerToken: p.ownerToken })).toBe(
    2 - BURST,
  );
  const [told] = await sql<{ count: number }[]>`
    select count(*)::int as count from changes
    where project = ${p.slug} and kind = 'routing' and sequence > ${head?.head ?? 0}`;
  expect(told?.count).toBe(1);
});

test("a charge reads the same few rows however long the pool's ledger is", async () => {
  const p = await newProject("paid");
  // A pool with a long history: 20,000 earlier charges (one row each) and a grant to cover them.
  await sql`
    insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
    select p.id, 'live', -1, 'delivery', 'req_history_' || n, 't'
    from projects p, generate_series(1, 20000) n where p.slug = ${p.slug}`;
  await api(stack().adminToken, "POST", `/projects/${p.slug}/credits`, {
    pool: "live",
    amount: 20_000,
  });

  const usage = { base: `/projects/${p.slug}`, ownerToken: p.ownerToken };
  const before = await remaining(usage);
  const ledgerRowsRead = await sql.begin(async (tx) => {
    await chargeDelivery(tx, {
      project: p.slug,
      pool: "live",
      requestId: `req_${p.slug}_next`,
      targetId: "t",
      bytes: 1,
    });
    // This transaction's own reads of the ledger, so far.
    const [read] = await tx<{ rows: number }[]>`
      select (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as rows
      from pg_stat_xact_user_tables where relname = 'credit_ledger'`;
    return read?.rows ?? 0;
  });
  expect(ledgerRowsRead).toBeLessThan(10);
  expect(await remaining(usage)).toBe(before - 1);
});
