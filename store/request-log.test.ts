/** The request log's rules (delivered; a stream logged once), on the test stack's Postgres. */
import { afterAll, expect, test } from "vitest";
import { classifyStatus } from "../core/delivery.ts";
import { newId } from "../core/secrets.ts";
import { defaultWaitingCaps as caps } from "../core/waiting.ts";
import { stack } from "../test/helpers.ts";
import {
  type AttemptEnd,
  type AttemptStart,
  earlierAttempts,
  endAttempts,
  startAttempts,
} from "./attempt-log.ts";
import { connect } from "./db.ts";
import {
  cancelRequest,
  type LoggedStream,
  openRequest,
  type Received,
  type RequestOpening,
  recordStream,
  settleRequest,
  settleRequests,
} from "./request-log.ts";
import { deliveredTargets, deliveriesPerHour } from "./request-views.ts";
import { seeWorker } from "./workers.ts";

const sql = connect(stack().databaseUrl, { max: 6 });
const project = newId("prj");
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'log', 'free')`;
afterAll(async () => {
  await sql`delete from projects where id = ${project}`;
  await sql.end();
});

const startedAt = new Date();

/** One attempt started, as the worker's group commit starts a set of one. */
const startAttempt = async (start: AttemptStart) => {
  const [started] = await startAttempts(sql, [start]);
  return started ?? { id: "", attempt: 0 };
};
const endAttempt = (end: AttemptEnd) => sql.begin((tx) => endAttempts(tx, [end]));

/** A new request of this file's project, as the log opens it. */
const openingOf = (requestId = newId("req")): RequestOpening & { received: Received } => ({
  requestId,
  project,
  line: "l",
  endpoint: "e",
  keyMode: "test",
  receivedAt: startedAt.toISOString(),
  bodyBytes: 2,
  received: { headers: { "content-type": "application/json" }, bodyBase64: "e30=", bodyRef: null },
});

/** A request with one ended attempt per target; answers its id. */
async function requestWith(targets: Record<string, number | null>): Promise<string> {
  const opening = openingOf();
  const { requestId } = opening;
  for (const [target, statusCode] of Object.entries(targets)) {
    const { id } = await startAttempt({
      opening,
      requestId,
      target: { id: target, name: target },
      startedAt,
    });
    await endAttempt({
      attemptId: id,
      statusCode,
      answer: null,
      latencyMs: 1,
      error: statusCode === null ? "refused" : null,
      charge: { project, pool: "live", requestId, targetId: target, bytes: 1 },
      circuit: "neutral",
      lastTry: false,
      endedAt: startedAt,
    });
  }
  return requestId;
}

test("an attempt delivered exactly when classifyStatus says its status delivered", async () => {
  for (const status of [100, 199, 200, 204, 299, 300, 304, 404, 429, 500, null]) {
    const requestId = await requestWith({ t: status });
    const delivered = status !== null && classifyStatus(status) === "delivered";
    expect([status, await settleRequest(sql, requestId, [])]).toEqual([
      status,
      delivered ? "delivered" : "failed",
    ]);
    expect(await deliveredTargets(sql, requestId)).toEqual(delivered ? ["t"] : []);
  }
});

test("a target that never answered is not delivered: beside a delivered one, the request partially failed", async () => {
  const thisHour = async () => (await deliveriesPerHour(sql, project, startedAt, 1))[0];
  const before = await thisHour();
  const requestId = await requestWith({ answered: 200, refused: null });

  expect(await settleRequest(sql, requestId, [])).toBe("partially_failed");
  expect(await deliveredTargets(sql, requestId)).toEqual(["answered"]);
  expect(await thisHour()).toEqual({
    hour: before?.hour,
    delivered: (before?.delivered ?? 0) + 1,
    failedAttempts: (before?.failedAttempts ?? 0) + 1,
  });
});

test("requests settled together each take their own status, and the holds of the deliveries named go back", async () => {
  const [both, half] = [
    await requestWith({ a: 200, b: 200 }),
    await requestWith({ a: 200, b: null }),
  ];
  await sql`insert into credit_holds (request_id, target_id, project_id, pool, amount)
    values (${half}, 'b', ${project}, 'test', 1), (${half}, 'c', ${project}, 'test', 1)`;
  const statuses = await settleRequests(sql, [
    { requestId: both, targetIds: ["a", "b"] },
    { requestId: half, targetIds: ["a", "b"] },
  ]);
  expect(Object.fromEntries(statuses)).toEqual({ [both]: "delivered", [half]: "partially_failed" });
  const held =
    await sql`select target_id as "targetId" from credit_holds where request_id = ${half}`;
  expect(held.map((h) => h.targetId)).toEqual(["c"]);
  await sql`delete from credit_holds where request_id = ${half}`;
});

const statusOf = async (requestId: string) =>
  (await sql`select status from requests where id = ${requestId}`)[0]?.status;

test("a cancel leaves a request with a 2xx attempt as its attempts settle it; without one, cancelled", async () => {
  const delivered = await requestWith({ t: 200 });
  expect(await cancelRequest(sql, openingOf(delivered), caps, ["t"])).toBe("delivered");
  expect(await statusOf(delivered)).toBe("delivered");
  const partly = await requestWith({ answered: 204, refused: null });
  const both = ["answered", "refused"];
  expect(await cancelRequest(sql, openingOf(partly), caps, both)).toBe("partially_failed");
  const failing = await requestWith({ t: 503 });
  expect(await cancelRequest(sql, openingOf(failing), caps, ["t"])).toBe("cancelled");
  expect(await statusOf(failing)).toBe("cancelled");
});

test("a cancel of a request one target got and another never tried (held) is partially failed", async () => {
  const requestId = await requestWith({ fast: 200 });
  const status = await cancelRequest(sql, openingOf(requestId), caps, ["fast", "held"]);
  expect(status).toBe("partially_failed");
  expect(await statusOf(requestId)).toBe("partially_failed");
});

test("a 2xx attempt that ends after its request was cancelled still wins", async () => {
  const opening = openingOf();
  const { requestId } = opening;
  const target = { id: "late", name: "late" };
  const { id } = await startAttempt({ opening, requestId, target, startedAt });
  expect(await cancelRequest(sql, opening, caps, ["late"])).toBe("cancelled");
  await endAttempt({
    attemptId: id,
    statusCode: 200,
    answer: null,
    latencyMs: 1,
    error: null,
    charge: { project, pool: "live", requestId, targetId: target.id, bytes: 1 },
    lastTry: false,
    circuit: "neutral",
    endedAt: startedAt,
  });
  expect(await statusOf(requestId)).toBe("delivered");
});

/** A stream of `bytes` to target `s`, ended with `statusCode`, as an edge reports it. */
function streamOf(statusCode: number | null, bytes = 70_000): LoggedStream {
  return {
    ...openingOf(),
    target: { id: "s", name: "s" },
    ownsStatus: true,
    statusCode,
    latencyMs: 5,
    bytes,
    error: statusCode === null ? "the stream target could not be reached" : null,
  };
}

const loggedStream = async (requestId: string) => ({
  attempts: await sql`
    select attempt, status_code, latency_ms from attempts where request_id = ${requestId}`,
  charged: (
    await sql<{ amount: string }[]>`
      select amount from credit_ledger where request_id = ${requestId}`
  ).map((row) => Number(row.amount)),
  status: (await sql`select status from requests where id = ${requestId}`)[0]?.status,
});

test("a stream's record sent again, even at once, is one attempt and one charge", async () => {
  const stream = streamOf(200);
  // Opened already, as async targets beside a stream open it: only the row's lock orders them.
  await openRequest(sql, stream);
  await Promise.all(Array.from({ length: 5 }, () => recordStream(sql, stream)));
  await recordStream(sql, stream);
  expect(await loggedStream(stream.requestId)).toEqual({
    attempts: [{ attempt: 1, statusCode: 200, latencyMs: 5 }],
    charged: [-2], // 70,000 bytes: two started 64 KiB
    status: "delivered",
  });
});

test("a stream that never reached its target is logged failed and not charged", async () => {
  const stream = streamOf(null);
  await recordStream(sql, stream);
  expect(await loggedStream(stream.requestId)).toEqual({
    attempts: [{ attempt: 1, statusCode: null, latencyMs: 5 }],
    charged: [],
    status: "failed",
  });
});

test("beside async targets, a stream logs its attempt and leaves the request's status to them", async () => {
  const stream = { ...streamOf(502), ownsStatus: false };
  await recordStream(sql, stream);
  expect(await loggedStream(stream.requestId)).toMatchObject({
    attempts: [{ attempt: 1, statusCode: 502 }],
    charged: [-2],
    status: "delivering",
  });
});

test("attempts started and ended as one set: a request of two targets opens once, each delivery is charged once and each request settles from its own attempts", async () => {
  const [a, b] = [openingOf(), openingOf()];
  const deliveries = [
    { opening: a, target: "t1", statusCode: 200 },
    { opening: a, target: "t2", statusCode: 500 },
    { opening: b, target: "t1", statusCode: 204 },
  ];
  const started = await startAttempts(
    sql,
    deliveries.map(({ opening, target }) => ({
      opening,
      requestId: opening.requestId,
      target: { id: target, name: target },
      startedAt,
    })),
  );
  expect(started.map((s) => s.attempt)).toEqual([1, 1, 1]);
  const ends = deliveries.map(
    ({ opening, target, statusCode }, i): AttemptEnd => ({
      attemptId: started[i]?.id ?? "",
      statusCode,
      answer: {
        headers: { "x-seen": target },
        bodyBase64: btoa(`ok ${target}`),
        truncated: i === 1,
      },
      latencyMs: 1,
      error: null,
      charge: { project, pool: "test", requestId: opening.requestId, targetId: target, bytes: 1 },
      circuit: "neutral",
      lastTry: false,
      endedAt: startedAt,
      finishing: "settled",
    }),
  );
  const ended = await sql.begin((tx) => endAttempts(tx, ends));
  expect(ended.map((e) => e.status)).toEqual(["partially_failed", "partially_failed", "delivered"]);
  // The same set again (its commit's answer lost): nothing is charged twice.
  await sql.begin((tx) => endAttempts(tx, ends));
  const charges = await sql<{ requestId: string; targetId: string }[]>`
    select request_id, target_id from credit_ledger
    where request_id in ${sql([a.requestId, b.requestId])} order by request_id, target_id`;
  expect(
    charges.map((c) => `${c.requestId === a.requestId ? "a" : "b"}/${c.targetId}`).sort(),
  ).toEqual(["a/t1", "a/t2", "b/t1"]);
  expect([await statusOf(a.requestId), await statusOf(b.requestId)]).toEqual([
    "partially_failed",
    "delivered",
  ]);
  // Kept for inspection: the request as received, each target's answer.
  const [request] = await sql<{ headers: unknown; body: Buffer }[]>`
    select headers, body from requests where id = ${a.requestId}`;
  expect([request?.headers, request?.body.toString()]).toEqual([
    { "content-type": "application/json" },
    "{}",
  ]);
  const answers = await sql<
    { responseHeaders: unknown; responseBody: Buffer; responseTruncated: boolean }[]
  >`
    select response_headers, response_body, response_truncated from attempts
    where request_id = ${a.requestId} order by target_id`;
  expect(
    answers.map((r) => [r.responseHeaders, r.responseBody.toString(), r.responseTruncated]),
  ).toEqual([
    [{ "x-seen": "t1" }, "ok t1", false],
    [{ "x-seen": "t2" }, "ok t2", true],
  ]);
});

test("a delayed request opened before its time keeps what was received once its first attempt opens it again", async () => {
  const { received, ...opening } = openingOf();
  await openRequest(sql, opening, "scheduled");
  await startAttempt({
    opening: { ...opening, received },
    requestId: opening.requestId,
    target: { id: "t", name: "t" },
    startedAt,
  });
  const [row] = await sql<{ status: string; headers: unknown }[]>`
    select status, headers from requests where id = ${opening.requestId}`;
  expect(row).toEqual({ status: "delivering", headers: received.headers });
});

test("the log tells a first attempt run again what became of the earlier ones: delivered, or in flight on a live worker or a dead one", async () => {
  const opening = openingOf();
  const { requestId } = opening;
  const start = (target: string, workerId: string) =>
    startAttempts(
      sql,
      [{ opening, requestId, target: { id: target, name: target }, startedAt }],
      workerId,
    );
  await seeWorker(sql, "worker-alive");
  await sql`
    insert into workers (id, seen_at) values ('worker-gone', now() - interval '1 minute')
    on conflict (id) do update set seen_at = excluded.seen_at`;
  await start("at-live", "worker-alive");
  await start("at-dead", "worker-gone");
  const [done] = await start("done", "worker-alive");
  await endAttempt({
    attemptId: done?.id ?? "",
    statusCode: 204,
    answer: null,
    latencyMs: 1,
    error: null,
    charge: { project, pool: "live", requestId, targetId: "done", bytes: 1 },
    circuit: "neutral",
    lastTry: false,
    endedAt: startedAt,
  });

  const earlier = await earlierAttempts(sql, [requestId]);
  const unended = (workerId: string, workerAlive: boolean) => ({
    delivered: null,
    unended: { startedAtMs: startedAt.getTime(), workerId, workerAlive },
  });
  expect(earlier.get(`${requestId} at-live 0`)).toEqual(unended("worker-alive", true));
  expect(earlier.get(`${requestId} at-dead 0`)).toEqual(unended("worker-gone", false));
  expect(earlier.get(`${requestId} done 0`)).toEqual({ delivered: 204, unended: null });
  // Tried again, the earlier attempt is lost, and the new one is the one in flight.
  await start("at-dead", "worker-alive");
  expect(earlier.size).toBe(3);
  expect((await earlierAttempts(sql, [requestId])).get(`${requestId} at-dead 0`)).toEqual(
    unended("worker-alive", true),
  );
});

test("an attempt started again after an earlier one delivered starts nothing: its start answers the 2xx (a replay starts anew)", async () => {
  const requestId = await requestWith({ done: 202, failing: 503 });
  const again = await startAttempts(
    sql,
    ["done", "failing"].map((t) => ({ requestId, target: { id: t, name: t }, startedAt })),
    "worker-alive",
  );
  expect(again.map(({ id, attempt, delivered }) => ({ id, attempt, delivered }))).toEqual([
    { id: "", attempt: 1, delivered: 202 },
    { id: expect.not.stringMatching(/^$/), attempt: 2, delivered: undefined },
  ]);
  const logged = await sql`
    select target_id, count(*)::int as n from attempts where request_id = ${requestId}
    group by target_id order by target_id`;
  expect(logged.map((r) => [r.targetId, r.n])).toEqual([
    ["done", 1],
    ["failing", 2],
  ]);
  // A replay of it is a run of its own: the 2xx of the call's run does not end it.
  const [replayed] = await startAttempts(sql, [
    { requestId, target: { id: "done", name: "done" }, startedAt, replay: 1 },
  ]);
  expect([replayed?.attempt, replayed?.delivered]).toEqual([2, undefined]);
});

test("no index of requests or attempts names a column their settles write, so a settle may be a HOT update", async () => {
  const settled = {
    requests: ["status", "updated_at", "skipped"],
    attempts: [
      "status_code",
      "latency_ms",
      "error",
      "response_headers",
      "response_body",
      "skipped",
    ],
  };
  for (const [table, columns] of Object.entries(settled)) {
    const indexes = await sql<{ definition: string }[]>`
      select pg_get_indexdef(indexrelid) as definition from pg_index
      where indrelid = ${table}::regclass`;
    expect(indexes.length).toBeGreaterThan(0);
    for (const { definition } of indexes) {
      for (const column of columns) expect(definition).not.toMatch(new RegExp(`\\b${column}\\b`));
    }
  }
});
