/** A set of attempts' ends moves their target's circuit as the ends would one after another. */
import { afterAll, expect, test } from "vitest";
import type { CircuitOutcome } from "../core/circuit.ts";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { type AttemptEnd, endAttempts, startAttempts } from "./attempt-log.ts";
import { connect } from "./db.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const sent: string[] = [];
/** A connection whose statements are kept as sent, to be counted. */
const traced = connect(stack().databaseUrl, { max: 1, onStatement: (s) => sent.push(s) });
const project = newId("prj");
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'moves', 'free')`;
afterAll(async () => {
  await sql`delete from projects where id = ${project}`;
  await Promise.all([sql.end(), traced.end()]);
});

/** Ends one attempt of a new request at `targetId` per outcome, as one set; answers their moves. */
async function endedAsOneSet(targetId: string, outcomes: CircuitOutcome[]) {
  const startedAt = new Date();
  const openings = outcomes.map(() => ({
    requestId: newId("req"),
    project,
    line: "l",
    endpoint: "e",
    keyMode: "test" as const,
    receivedAt: startedAt.toISOString(),
    bodyBytes: 2,
    received: { headers: {}, bodyBase64: "e30=", bodyRef: null },
  }));
  const started = await startAttempts(
    sql,
    openings.map((opening) => ({
      opening,
      requestId: opening.requestId,
      target: { id: targetId, name: "t" },
      startedAt,
    })),
  );
  const ends = outcomes.map(
    (circuit, i): AttemptEnd => ({
      attemptId: started[i]?.id ?? "",
      statusCode: circuit === "failed" ? 503 : 200,
      answer: null,
      latencyMs: 1,
      error: null,
      charge: {
        project,
        pool: "test",
        requestId: openings[i]?.requestId ?? "",
        targetId,
        bytes: 1,
      },
      circuit,
      lastTry: false,
      endedAt: new Date(startedAt.getTime() + i),
    }),
  );
  return (await traced.begin((tx) => endAttempts(tx, ends))).map((ended) => ended.circuit);
}

test("a set's failures open their target's circuit at the threshold, a success within it ending the run; the next set's success recovers it", async () => {
  const targetId = newId("tgt"); // no endpoint: the default breaker, 10 failures
  const failures = (n: number): CircuitOutcome[] => Array.from({ length: n }, () => "failed");
  const moves = await endedAsOneSet(targetId, [...failures(5), "succeeded", ...failures(10)]);
  expect(moves).toEqual([...Array.from({ length: 15 }, () => null), "opened"]);
  const circuit = async () =>
    (
      await sql<{ state: string; failures: number }[]>`
        select state, failures from target_circuits where target_id = ${targetId}`
    )[0];
  expect(await circuit()).toEqual({ state: "open", failures: 10 });
  expect(await endedAsOneSet(targetId, ["succeeded", "failed"])).toEqual(["recovered", null]);
  expect(await circuit()).toEqual({ state: "closed", failures: 1 });
  expect(
    (await sql`select event from circuit_events where target_id = ${targetId} order by id`).map(
      (e) => e.event,
    ),
  ).toEqual(["opened", "recovered"]);
  await sql`delete from target_circuits where target_id = ${targetId}`;
  await sql`delete from circuit_events where target_id = ${targetId}`;
});

test("a set of ends moves its failing target's circuit in a few statements, however many ends it holds", async () => {
  const targetId = newId("tgt");
  const outcomes: CircuitOutcome[] = Array.from({ length: 40 }, (_, i) =>
    i % 4 === 0 ? "failed" : "succeeded",
  );
  sent.length = 0;
  await endedAsOneSet(targetId, outcomes);
  expect(
    sent.filter((statement) => statement.includes("target_circuits")).length,
  ).toBeLessThanOrEqual(5);
  await sql`delete from target_circuits where target_id = ${targetId}`;
});
