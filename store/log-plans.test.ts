/**
 * The plans of the statements every delivery runs, on a request log of 20,000 requests that
 * Postgres has statistics for (autovacuum's analyze, run here at once): each finds its rows
 * through an index. A statement the planner can only answer by reading a log table whole costs
 * every delivery in proportion to the log's size. With no statistics yet the planner expects an
 * id to match 0.5% of a table and reads it whole, so the stack's own Postgres analyzes a table
 * within seconds of its growth, not a minute (dev/postgres-server.ts).
 */
import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { endAttempts, startAttempts } from "./attempt-log.ts";
import { reserveCreditsBatch } from "./credits.ts";
import { connect } from "./db.ts";

/** The tables that grow with every delivery. */
const LOG_TABLES = ["requests", "attempts", "credit_holds", "credit_ledger"];
const LOGGED = 20_000;
const BATCH = 30;

const sql = connect(stack().databaseUrl, { max: 2 });
const seen: string[] = [];
/** A connection whose statements are kept as sent, to be explained. */
const traced = connect(stack().databaseUrl, { max: 1, onStatement: (s) => seen.push(s) });
const project = newId("prj");
afterAll(async () => {
  await sql`delete from projects where id = ${project}`;
  await Promise.all([sql.end(), traced.end()]);
});

await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'plans', 'free')`;
await sql`
  insert into requests (id, project_id, line_key, endpoint_path, key_mode, status, body_bytes,
    received_at)
  select ${project} || '-' || n, ${project}, 'l', 'e', 'live', 'delivered', 2, now()
  from generate_series(1, ${LOGGED}) as n`;
await sql`
  insert into attempts (request_id, target_id, target_name, attempt, started_at, status_code,
    latency_ms)
  select ${project} || '-' || n, 't', 't', 1, now(), 200, 1 from generate_series(1, ${LOGGED}) as n`;
await sql`
  insert into credit_ledger (project_id, pool, amount, reason, request_id, target_id)
  select ${project}, 'live', -1, 'delivery', ${project} || '-' || n, 't'
  from generate_series(1, ${LOGGED}) as n`;
await sql`
  insert into credit_holds (request_id, target_id, project_id, pool, amount)
  select ${project} || '-' || n, 't', ${project}, 'live', 1 from generate_series(1, ${LOGGED}) as n`;
await sql`analyze requests, attempts, credit_holds, credit_ledger`;

/** The log tables `statement`'s generic plan (the one a prepared statement settles on) reads whole. */
async function tablesScanned(statement: string): Promise<string[]> {
  type PlanNode = { "Node Type": string; "Relation Name"?: string; Plans?: PlanNode[] };
  const [explained] = await sql.unsafe<{ "QUERY PLAN": [{ Plan: PlanNode }] }[]>(
    `explain (generic_plan, format json) ${statement}`,
  );
  const scanned: string[] = [];
  const walk = (node: PlanNode) => {
    if (node["Node Type"] === "Seq Scan" && LOG_TABLES.includes(node["Relation Name"] ?? "")) {
      scanned.push(node["Relation Name"] as string);
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  if (explained) walk(explained["QUERY PLAN"][0].Plan);
  return scanned;
}

test("a batch's attempts started, ended and settled, and its credits reserved, read no log table whole", async () => {
  const requestIds = Array.from({ length: BATCH }, () => newId("req"));
  const startedAt = new Date();
  await reserveCreditsBatch(traced, {
    project,
    pool: "live",
    calls: requestIds.map((requestId) => ({ requestId, holds: [{ targetId: "t", credits: 1 }] })),
  });
  const started = await startAttempts(
    traced,
    requestIds.map((requestId) => ({
      opening: {
        requestId,
        project,
        line: "l",
        endpoint: "e",
        keyMode: "live",
        receivedAt: startedAt.toISOString(),
        bodyBytes: 2,
        received: { headers: {}, bodyBase64: "e30=", bodyRef: null },
      },
      requestId,
      target: { id: "t", name: "t" },
      startedAt,
    })),
  );
  await traced.begin((tx) =>
    endAttempts(
      tx,
      started.map(({ id }, i) => ({
        attemptId: id,
        statusCode: 200,
        answer: null,
        latencyMs: 1,
        error: null,
        charge: {
          project,
          pool: "live",
          requestId: requestIds[i] as string,
          targetId: "t",
          bytes: 2,
        },
        circuit: "neutral",
        lastTry: false,
        finishing: "settled",
        endedAt: startedAt,
      })),
    ),
  );

  const statements = [...new Set(seen)].filter((s) => LOG_TABLES.some((t) => s.includes(t)));
  expect(statements.length).toBeGreaterThanOrEqual(6);
  const scans = await Promise.all(
    statements.map(async (s) => ({ statement: s, scanned: await tablesScanned(s) })),
  );
  expect(scans.filter(({ scanned }) => scanned.length > 0)).toEqual([]);
});

test("the stack's Postgres looks for tables to analyze every 10 s, not every minute", async () => {
  const [setting] = await sql<{ seconds: number }[]>`
    select setting::int as seconds from pg_settings where name = 'autovacuum_naptime'`;
  expect(setting?.seconds).toBe(10);
});
