/** The request log's one rule, delivered, on the test stack's Postgres. */
import { afterAll, expect, test } from "vitest";
import { classifyStatus } from "../core/delivery.ts";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { connect } from "./db.ts";
import {
  deliveriesPerHour,
  endAttempt,
  failedTargets,
  type RequestOpening,
  settleRequest,
  startAttempt,
} from "./request-log.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const project = newId("prj");
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'log', 'free')`;
afterAll(async () => {
  await sql`delete from projects where id = ${project}`;
  await sql.end();
});

const startedAt = new Date();

/** A request with one ended attempt per target; answers its id. */
async function requestWith(targets: Record<string, number | null>): Promise<string> {
  const requestId = newId("req");
  const opening: RequestOpening = {
    requestId,
    project,
    line: "l",
    endpoint: "e",
    keyMode: "test",
    receivedAt: startedAt.toISOString(),
    bodyBytes: 1,
  };
  for (const [target, statusCode] of Object.entries(targets)) {
    const { id } = await startAttempt(sql, {
      opening,
      requestId,
      target: { id: target, name: target },
      startedAt,
    });
    await endAttempt(sql, id, {
      statusCode,
      latencyMs: 1,
      error: statusCode === null ? "refused" : null,
      charge: { project, pool: "live", requestId, targetId: target, bytes: 1 },
    });
  }
  return requestId;
}

test("an attempt delivered exactly when classifyStatus says its status delivered", async () => {
  for (const status of [100, 199, 200, 204, 299, 300, 304, 404, 429, 500, null]) {
    const requestId = await requestWith({ t: status });
    const delivered = status !== null && classifyStatus(status) === "delivered";
    expect([status, await settleRequest(sql, requestId)]).toEqual([
      status,
      delivered ? "delivered" : "failed",
    ]);
    expect(await failedTargets(sql, requestId)).toEqual(delivered ? [] : ["t"]);
  }
});

test("a target that never answered is not delivered: beside a delivered one, the request partially failed", async () => {
  const thisHour = async () => (await deliveriesPerHour(sql, project, startedAt, 1))[0];
  const before = await thisHour();
  const requestId = await requestWith({ answered: 200, refused: null });

  expect(await settleRequest(sql, requestId)).toBe("partially_failed");
  expect(await failedTargets(sql, requestId)).toEqual(["refused"]);
  expect(await thisHour()).toEqual({
    hour: before?.hour,
    delivered: (before?.delivered ?? 0) + 1,
    failedAttempts: (before?.failedAttempts ?? 0) + 1,
  });
});
