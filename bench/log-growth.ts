/**
 * The request log's growth per request (issue 28: every request inspectable): on a stack of its
 * own, `BENCH_LOG_REQUESTS` (2,000) async calls with 1 KiB JSON bodies, eight at a time, to the
 * bench target (bench/target.ts answers 200 with an 11-byte body), until all are delivered. The
 * log's tables (requests, attempts, bodies: heap, TOAST and indexes) are measured before and
 * after, once as Postgres grew them and once after a VACUUM (the space updates left behind, which
 * the next rows reuse); and the bytes of the kept content alone (headers, body, answers).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { connect } from "../store/db.ts";
import { benchStack, runBench } from "./harness.ts";

const REQUESTS = Number(process.env.BENCH_LOG_REQUESTS ?? 2000);
const CONCURRENCY = 8;
const BODY = JSON.stringify({ event: "order.paid", padding: "x".repeat(1024 - 39) });

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-log-growth-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const { stack, slug, key } = await benchStack(cleanup, dir);
  const sql = connect(stack.databaseUrl, { max: 2 });
  cleanup.add(() => sql.end());
  const logBytes = async () => {
    const [row] = await sql<{ bytes: string }[]>`
      select sum(pg_total_relation_size(t))::bigint as bytes
      from unnest(array['requests', 'attempts', 'bodies']::regclass[]) as t`;
    return Number(row?.bytes ?? 0);
  };
  const delivered = async () => {
    const [row] = await sql<{ count: number }[]>`
      select count(*)::int as count from requests where status = 'delivered'`;
    return row?.count ?? 0;
  };

  const before = await logBytes();
  let sent = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (sent < REQUESTS) {
        sent++;
        const answer = await request(`${stack.edgeUrl}/v1/async`, {
          method: "POST",
          headers: {
            host: `${slug}.localhost`,
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
          },
          body: BODY,
        });
        await answer.body.dump();
        if (answer.statusCode !== 202) throw new Error(`the edge answered ${answer.statusCode}`);
      }
    }),
  );
  while ((await delivered()) < REQUESTS) await new Promise((resolve) => setTimeout(resolve, 250));
  const grown = await logBytes();
  await sql`vacuum requests, attempts, bodies`;
  const vacuumed = await logBytes();
  const [kept] = await sql<{ request: string; answers: string }[]>`
    select
      (select sum(coalesce(pg_column_size(headers), 0) + coalesce(pg_column_size(body), 0))
        from requests) as request,
      (select sum(coalesce(pg_column_size(response_headers), 0)
          + coalesce(pg_column_size(response_body), 0)) from attempts) as answers`;
  const perRequest = (bytes: number) => Math.round(bytes / REQUESTS);
  console.log(
    `\nThe request log's growth, ${REQUESTS} requests of ${BODY.length} bytes, delivered:`,
  );
  console.log("| measure | bytes per request |\n|---|---|");
  console.log(`| requests + attempts + bodies, as grown | ${perRequest(grown - before)} |`);
  console.log(`| the same after VACUUM | ${perRequest(vacuumed - before)} |`);
  console.log(
    `| of which kept headers and body (pg_column_size) | ${perRequest(Number(kept?.request))} |`,
  );
  console.log(`| of which kept answers | ${perRequest(Number(kept?.answers))} |`);
});
