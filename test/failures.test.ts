/** The failure queue: failed deliveries listed, replayed alone or in bulk, for failed targets only. */
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  projectWithEndpoint,
  relay,
  relayTemporal,
  targetServer,
} from "./helpers.ts";

type Log = {
  requestId: string;
  status: string;
  attempts: { targetName: string; statusCode: number | null }[];
};

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

/** A target that refuses with 400 until `healed` is set. */
async function healable() {
  const state = { healed: false };
  const server = await targetServer(() => ({ status: state.healed ? 200 : 400 }));
  closers.push(server.close);
  return { ...server, heal: () => (state.healed = true) };
}

async function settledAs(
  p: { base: string; ownerToken: string },
  requestId: string,
  status: string,
) {
  return eventually(async () => {
    const log = await api<Log>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
    return log.body.status === status && log.body;
  });
}

test("a replay retries only the failed targets and settles the request from all its attempts", async () => {
  const [fine, broken] = [await targetServer(), await healable()];
  closers.push(fine.close);
  const p = await projectWithEndpoint([
    { name: "fine", targetUrl: fine.url },
    { name: "broken", targetUrl: broken.url },
  ]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' })).json();
  await settledAs(p, requestId, "partially_failed");

  const queue = await api<{ requests: Log[] }>(p.ownerToken, "GET", `${p.base}/failures`);
  expect(queue.body.requests.map((r) => r.requestId)).toEqual([requestId]);

  broken.heal();
  const replay = await api<Log>(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);
  expect(replay.status).toBe(202);
  const log = await settledAs(p, requestId, "delivered");
  expect(log.attempts.map((a) => `${a.targetName} ${a.statusCode}`).sort()).toEqual([
    "broken 200",
    "broken 400",
    "fine 200",
  ]);
  expect(fine.received).toHaveLength(1);
  expect(broken.received.map((r) => r.body)).toEqual(['{"n":1}', '{"n":1}']);
  expect(new Set(broken.received.map((r) => r.headers["x-relay-delivery-id"])).size).toBe(1);
  expect(
    (await api<{ requests: Log[] }>(p.ownerToken, "GET", `${p.base}/failures`)).body.requests,
  ).toEqual([]);
});

test("bulk replay is a recovery job of every failure matching the filter", async () => {
  const broken = await healable();
  const p = await projectWithEndpoint([{ name: "broken", targetUrl: broken.url }]);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
    ids.push(requestId);
    await settledAs(p, requestId, "failed");
  }
  broken.heal();
  const other = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, {
    endpoint: "v1/other",
  });
  expect(other.body).toMatchObject({ state: "running", matched: 0 });
  // A status no failure has matches none.
  const queued = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, { status: "queued" });
  expect([queued.status, queued.body.matched]).toEqual([202, 0]);
  const bulk = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, {
    endpoint: "v1/hook",
  });
  expect(bulk.status).toBe(202);
  expect(bulk.body).toMatchObject({
    state: "running",
    matched: 3,
    filter: { statuses: ["failed", "partially_failed"], endpoint: "v1/hook" },
  });
  for (const id of ids) await settledAs(p, id, "delivered");
  const job = await eventually(async () => {
    const read = await api(p.ownerToken, "GET", `${p.base}/recoveries/${bulk.body.recoveryId}`);
    return read.body.finishedAt && read.body;
  });
  expect(job).toMatchObject({ state: "completed", sent: 3, failed: 0, skipped: 0, running: 0 });
  expect(
    (await api(p.ownerToken, "POST", `${p.base}/failures/replay`, { color: "red" })).status,
  ).toBe(400);
});

test("a retry from the Temporal UI (a reset of the request's workflow) shows in the request log", async () => {
  const broken = await healable();
  const p = await projectWithEndpoint([{ name: "broken", targetUrl: broken.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await settledAs(p, requestId, "failed");
  broken.heal();

  // What the UI's "Reset" to the first workflow task sends (and `temporal workflow reset`).
  const client = await relayTemporal();
  const { events } = await client.workflow.getHandle(requestId).fetchHistory();
  const firstTask = events?.find((e) => e.workflowTaskCompletedEventAttributes);
  await client.workflowService.resetWorkflowExecution({
    namespace: "default",
    workflowExecution: { workflowId: requestId },
    workflowTaskFinishEventId: firstTask?.eventId,
    reason: "operator retry",
    requestId: crypto.randomUUID(),
  });
  await client.connection.close();

  const log = await settledAs(p, requestId, "delivered");
  expect(log.attempts.map((a) => a.statusCode)).toEqual([400, 200]);
  const usage = await api<{ pools: { live: { used: number } } }>(
    p.ownerToken,
    "GET",
    `${p.base}/usage`,
  );
  expect(usage.body.pools.live.used).toBe(1); // one delivery, charged once
});
