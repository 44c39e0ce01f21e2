/**
 * What a delivery's charge costs as its pool's ledger grows (a row per delivery): one charge at
 * a time, p50 and p99, on the pool as the bench left it (the baseline) and after 10,000 and
 * 100,000 more rows of history. A charge reads its pool's running balance, not the ledger, so
 * the ratios should stay near 1. A section of bench/relay.ts, on its stack.
 */
import { mkdir, writeFile } from "node:fs/promises";
import type { Stack } from "../dev/stack.ts";
import { chargeDelivery } from "../store/credits.ts";
import { connect } from "../store/db.ts";
import { percentile, quick } from "./harness.ts";

const charges = quick ? 100 : 500;
const histories = quick ? [0, 10_000] : [0, 10_000, 100_000];

interface Result {
  ledgerRows: number;
  p50Ms: number;
  p99Ms: number;
}

export async function chargeCost(stack: Stack, project: string): Promise<void> {
  const sql = connect(stack.databaseUrl, { max: 1 });
  const results: Result[] = [];
  let n = 0;
  try {
    for (const added of histories) {
      // Earlier deliveries' charges to the test pool (the bench calls with a live key, so the
      // test pool running dry refuses none of them).
      await sql`
        insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
        select p.id, 'test', -1, 'delivery', 'req_history_' || ${n} || '_' || g, 'bench'
        from projects p, generate_series(1, ${added}::int) g where p.slug = ${project}`;
      await sql`vacuum analyze credit_ledger`;
      const latencies: number[] = [];
      for (let i = 0; i < charges; i++) {
        const started = performance.now();
        await sql.begin((tx) =>
          chargeDelivery(tx, {
            project,
            pool: "test",
            requestId: `req_charge_${n}_${i}`,
            targetId: "bench",
            bytes: 1,
          }),
        );
        latencies.push(performance.now() - started);
      }
      const [rows] = await sql<{ count: number }[]>`
        select count(*)::int as count from credit_ledger l join projects p on p.id = l.project_id
        where p.slug = ${project}`;
      results.push({
        ledgerRows: rows?.count ?? 0,
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
      });
      n++;
    }
  } finally {
    await sql.end();
  }
  const [baseline] = results;
  console.log(
    `\n**(g) A delivery's charge by ledger length**, ${charges} charges one at a time:\n`,
  );
  console.log("| ledger rows (project) | p50 ms | p99 ms | p50 vs baseline |");
  console.log("|---|---|---|---|");
  for (const r of results) {
    console.log(
      `| ${r.ledgerRows} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${(r.p50Ms / (baseline?.p50Ms ?? 1)).toFixed(2)}x |`,
    );
  }
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/charges.json",
    JSON.stringify({ at: new Date(), charges, results }, null, 2),
  );
}
