/**
 * Idempotency-Key: a repeat answers the first answer and queues nothing; Temporal's workflow-id
 * conflict policy does the deduplication.
 */
import { afterAll, expect, test } from "vitest";
import { api, finishedLog, mintKey, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));
async function target(...args: Parameters<typeof targetServer>) {
  const server = await targetServer(...args);
  closers.push(server.close);
  return server;
}

const withKey = (key: string, body: string) => ({
  body,
  headers: { "idempotency-key": key },
});

test("a repeat with the same key and body answers the first 202 and queues nothing", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const first = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("order-1", '{"n":1}') });
  expect(first.status).toBe(202);
  const { requestId } = first.json();
  await finishedLog(p, requestId);

  const repeat = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("order-1", '{"n":1}') });
  expect(repeat.status).toBe(202);
  expect(repeat.json()).toEqual({ status: "queued", requestId });

  const other = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("order-2", '{"n":1}') });
  expect(other.json().requestId).not.toBe(requestId);
  await finishedLog(p, other.json().requestId);
  expect(sink.received.map((r) => r.headers["x-relay-request-id"])).toEqual([
    requestId,
    other.json().requestId,
  ]);
  const log = await api<{ requests: unknown[] }>(p.ownerToken, "GET", `${p.base}/requests`);
  expect(log.body.requests).toHaveLength(2);
});

test("the same key with another body is 422 idempotency_key_reused; the first is untouched", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  // Large bodies travel by reference: the refused repeat must not overwrite the stored first.
  const large = (fill: string) => JSON.stringify({ blob: fill.repeat(300 * 1024) });
  const first = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("k", large("a")) });
  expect(first.status).toBe(202);
  const reused = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("k", large("b")) });
  expect(reused.status).toBe(422);
  expect(reused.json().error.code).toBe("idempotency_key_reused");
  expect((await finishedLog(p, first.json().requestId)).status).toBe("delivered");
  expect(sink.received).toHaveLength(1);
  expect(sink.received[0]?.body).toBe(large("a"));
});

test("a sync repeat answers the first call's status and body; the target is called once", async () => {
  let calls = 0;
  const answering = await target(() => ({ status: 201 + calls++ }));
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: answering.url, deliveryMode: "sync" },
  ]);
  const first = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("pay-7", "{}") });
  const repeat = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("pay-7", "{}") });
  expect([first.status, repeat.status]).toEqual([201, 201]);
  expect(repeat.text).toBe(first.text);
  expect(repeat.headers["x-relay-request-id"]).toBe(first.headers["x-relay-request-id"]);
  expect(calls).toBe(1);
});

test.each([
  ["over 255 characters", "k".repeat(256), "Idempotency-Key must be 1 to 255 characters"],
  ["a control character", "order\t1", "Idempotency-Key may not contain control characters"],
])("an Idempotency-Key with %s is 400", async (_, value, message) => {
  const sink = await target();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey(value, "{}") });
  expect(answer.status).toBe(400);
  expect(answer.json().error).toEqual({ code: "bad_request", message });
  expect(sink.received).toHaveLength(0);
});

test("an Idempotency-Key on a stream endpoint is 400: a stream cannot be answered twice", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: sink.url, deliveryMode: "stream" },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("s", "{}") });
  expect(answer.status).toBe(400);
  expect(sink.received).toHaveLength(0);
});

test("the same Idempotency-Key from three API keys (two live, one test) is three calls, each delivered", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const otherLive = await mintKey(p, "live");
  const testKey = await mintKey(p, "test");
  const ids: string[] = [];
  for (const key of [p.key, otherLive, testKey]) {
    const answer = await relay(p.slug, "/v1/hook", { key, ...withKey("order-1", '{"n":1}') });
    expect(answer.status).toBe(202);
    ids.push(answer.json().requestId);
  }
  expect(new Set(ids).size).toBe(3);
  for (const id of ids) expect((await finishedLog(p, id)).status).toBe("delivered");
  expect(sink.received.map((r) => r.headers["x-relay-request-id"]).sort()).toEqual(ids.sort());
});

test("a repeat answers the first call's status, whatever its own delay says", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const delayed = { "idempotency-key": "later-1", "relay-delay": "1h" };
  const first = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", headers: delayed });
  expect(first.json()).toEqual({ status: "scheduled", requestId: expect.any(String) });
  const repeat = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("later-1", "{}") });
  expect(repeat.status).toBe(202);
  expect(repeat.json()).toEqual(first.json());

  const now = await relay(p.slug, "/v1/hook", { key: p.key, ...withKey("now-1", "{}") });
  expect(now.json()).toEqual({ status: "queued", requestId: expect.any(String) });
  const laterRepeat = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: "{}",
    headers: { "idempotency-key": "now-1", "relay-delay": "1h" },
  });
  expect(laterRepeat.status).toBe(202);
  expect(laterRepeat.json()).toEqual(now.json());
  await finishedLog(p, now.json().requestId);
  expect(sink.received).toHaveLength(1);
});
