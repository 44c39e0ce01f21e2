/**
 * A replay is a delivery like a call (docs/api.md "The failure queue"): it holds and is charged
 * its credits (402 when its pool cannot hold them), it takes a place under the project's cap on
 * waiting deliveries, and one replay of a request runs at a time (409 for the others), its
 * attempts ending in the log.
 */
import { afterAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type RequestLog,
  relay,
  spendDownTo,
  stack,
  targetServer,
} from "./helpers.ts";

type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const sql = connect(stack().databaseUrl, { max: 2 });
const sink = await targetServer();
afterAll(async () => {
  await sink.close();
  await sql.end();
});

const usedCredits = async (p: Project) =>
  (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
    .pools.live.used;

const replay = (p: Project, requestId: string) =>
  api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);

/** A request's log once it has `attempts` attempts, every one of them ended. */
const endedAttempts = (p: Project, requestId: string, attempts: number) =>
  eventually(async () => {
    const log = await finishedLog<{ status: string; attempts: { latencyMs: number | null }[] }>(
      p,
      requestId,
    );
    return (
      log.attempts.length === attempts && log.attempts.every((a) => a.latencyMs !== null) && log
    );
  });

/** A project whose one endpoint sends to the sink, and one call it delivered. */
async function deliveredCall() {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' });
  const { requestId } = answer.json() as { requestId: string };
  expect((await finishedLog(p, requestId)).status).toBe("delivered");
  return { p, requestId };
}

const receivedOf = (requestId: string) =>
  sink.received.filter((r) => r.headers["x-relay-request-id"] === requestId);

test("each replay of a delivered request is charged as a delivery", async () => {
  const { p, requestId } = await deliveredCall();
  expect(await usedCredits(p)).toBe(1);
  for (const round of [2, 3]) {
    expect((await replay(p, requestId)).status).toBe(202);
    await endedAttempts(p, requestId, round);
  }
  expect(receivedOf(requestId)).toHaveLength(3);
  expect(await usedCredits(p)).toBe(3);
});

test("a replay its pool cannot hold is 402 and sends nothing", async () => {
  const { p, requestId } = await deliveredCall();
  await spendDownTo(sql, p.slug, 1); // the call used 1 of the 100: nothing is left
  const refused = await replay(p, requestId);
  expect(refused.status).toBe(402);
  expect(refused.body).toMatchObject({ error: { code: "insufficient_credits" } });
  expect((await finishedLog<RequestLog>(p, requestId)).status).toBe("delivered");
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(receivedOf(requestId)).toHaveLength(1);
});

test("one replay of a request runs at a time: the others at once are 409, and its attempts end", async () => {
  const { p, requestId } = await deliveredCall();
  // Paused, the target holds the replay that begins: it is under way while the others arrive.
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/pause`);
  const answers = await Promise.all(Array.from({ length: 20 }, () => replay(p, requestId)));
  const statuses = answers.map((a) => a.status).sort();
  expect(statuses).toEqual([202, ...Array(19).fill(409)]);
  const conflict = answers.find((a) => a.status === 409);
  expect(conflict?.body).toMatchObject({ error: { code: "conflict" } });
  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/resume`);
  await endedAttempts(p, requestId, 2);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(receivedOf(requestId)).toHaveLength(2);
  expect(await usedCredits(p)).toBe(2);
});

test("a replay takes a place under the cap on waiting deliveries", async () => {
  const { p, requestId } = await deliveredCall();
  await sql`update projects set max_waiting_deliveries = 1 where slug = ${p.slug}`;
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/pause`);
  const held = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":2}' });
  expect(held.status).toBe(202);
  const waiting = async () =>
    (await api<{ targets: { waiting: number }[] }>(p.ownerToken, "GET", `${endpoint}/circuits`))
      .body.targets[0]?.waiting;
  await eventually(async () => (await waiting()) === 1);

  const refused = await replay(p, requestId);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ error: { code: "limit_exceeded" } });
  expect((await finishedLog<RequestLog>(p, requestId)).status).toBe("delivered");

  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/resume`);
  await finishedLog(p, held.json().requestId);
  expect((await replay(p, requestId)).status).toBe(202);
  await endedAttempts(p, requestId, 2);
}, 60_000);

test("a bulk replay stops where the pool runs out, failing its job with why; with the pool empty it is 402", async () => {
  let healed = false;
  const healable = await targetServer(() => ({ status: healed ? 200 : 400 }));
  const p = await projectWithEndpoint([{ name: "t", targetUrl: healable.url }]);
  for (let i = 0; i < 3; i++) {
    const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
    expect((await finishedLog(p, requestId)).status).toBe("failed");
  }
  await spendDownTo(sql, p.slug, 5); // 3 used by the failed calls' answers: 2 left
  healed = true;
  const bulk = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, {});
  expect(bulk.body).toMatchObject({ state: "running", matched: 3, credits: 3 });
  const job = await eventually(async () => {
    const read = await api<{ finishedAt: string | null; error: string }>(
      p.ownerToken,
      "GET",
      `${p.base}/recoveries/${bulk.body.recoveryId}`,
    );
    return read.body.finishedAt !== null && read.body;
  });
  expect(job).toMatchObject({ state: "failed", sent: 2, failed: 0 });
  expect(job.error).toMatch(/credits/);
  expect(healable.received).toHaveLength(5);
  // The target answers before the worker charges for it.
  await eventually(async () => (await usedCredits(p)) === 100);
  const refused = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, {});
  expect(refused.status).toBe(402);
  await healable.close();
});

test("a project's replays under way are capped (409 limit_exceeded past it), the admin may set its own", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const ids: string[] = [];
  for (const n of [1, 2, 3]) {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${n}}` });
    ids.push(answer.json().requestId);
  }
  for (const id of ids) expect((await finishedLog(p, id)).status).toBe("delivered");
  const set = await api(stack().adminToken, "PUT", `${p.base}/limits`, { replays: 2 });
  expect(set.body).toMatchObject({ replays: { limit: 2, used: 0 } });
  // Paused, the target holds the replays: they stay under way.
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/pause`);

  const [first, second, third] = ids as [string, string, string];
  expect((await replay(p, first)).status).toBe(202);
  expect((await replay(p, second)).status).toBe(202);
  const refused = await replay(p, third);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ error: { code: "limit_exceeded" } });
  expect((refused.body as { error: { message: string } }).error.message).toMatch(
    /cap of 2 replays/,
  );

  // Once they end, there is room again.
  await api(p.ownerToken, "POST", `${endpoint}/targets/sink/resume`);
  await endedAttempts(p, first, 2);
  await endedAttempts(p, second, 2);
  await eventually(async () => (await replay(p, third)).status === 202);
}, 120_000);
