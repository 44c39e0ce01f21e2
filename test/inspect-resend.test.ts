/**
 * Replay of any finished request, and "send again" as a new request, on the real stack (issue 28,
 * inspectable requests). Send again reads the original's headers and body from the log; here
 * they are written by hand where the test needs them (test/inspect-logged.test.ts has the worker
 * write them).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, expect, test } from "vitest";
import { BodyEncoding, RequestLogService } from "../gen/relay/v1/requests_pb.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 1 });
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await sql.end();
});

async function target() {
  const server = await targetServer();
  closers.push(server.close);
  return server;
}

type Log = {
  requestId: string;
  status: string;
  resentFrom: string | null;
  attempts: { targetName: string; statusCode: number | null }[];
};

const used = async (p: { base: string; ownerToken: string }) =>
  (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
    .pools.live.used;

test("a delivered request replays to every target again; a cancelled one to its targets after all", async () => {
  const [a, b] = [await target(), await target()];
  const p = await projectWithEndpoint([
    { name: "a", targetUrl: a.url },
    { name: "b", targetUrl: b.url },
  ]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' })).json();
  await finishedLog(p, requestId);
  const replay = await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);
  expect(replay.status).toBe(202);
  const log = await eventually(async () => {
    const read = await finishedLog<Log>(p, requestId);
    return read.attempts.length === 4 && read;
  });
  expect(log.status).toBe("delivered");
  expect([a.received.length, b.received.length]).toEqual([2, 2]);
  expect(a.received[1]?.body).toBe('{"n":1}');

  // Scheduled: not finished, so no replay; cancelled, it replays to its targets.
  const later = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"n":2}',
      headers: { "relay-delay": "1h" },
    })
  ).json();
  const early = await api<{ error: { code: string; message: string } }>(
    p.ownerToken,
    "POST",
    `${p.base}/requests/${later.requestId}/replay`,
  );
  expect([early.status, early.body.error.code]).toEqual([409, "conflict"]);
  expect(early.body.error.message).toContain("only a finished request");
  await api(p.ownerToken, "DELETE", `${p.base}/requests/${later.requestId}`);
  await eventually(async () => (await finishedLog<Log>(p, later.requestId)).status === "cancelled");
  expect(
    (await api(p.ownerToken, "POST", `${p.base}/requests/${later.requestId}/replay`)).status,
  ).toBe(202);
  await eventually(async () => (await finishedLog<Log>(p, later.requestId)).status === "delivered");
  expect(a.received.map((r) => r.body)).toEqual(['{"n":1}', '{"n":1}', '{"n":2}']);
  expect((await api(p.ownerToken, "POST", `${p.base}/requests/req_none/replay`)).status).toBe(404);
});

/** A finished request whose log has its headers and body, as the worker keeps them. */
async function loggedRequest(endpoint: Record<string, unknown> = {}) {
  const received = await target();
  const p = await projectWithEndpoint([{ name: "t", targetUrl: received.url }], endpoint);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"order":1}',
      headers: { "x-order": "1", "idempotency-key": "order-1" },
    })
  ).json();
  await finishedLog(p, requestId);
  await sql`update requests set headers = ${sql.json({
    "content-type": "application/json",
    "x-order": "1",
    "idempotency-key": "order-1",
  })}, body = ${Buffer.from('{"order":1}')} where id = ${requestId}`;
  return { p, requestId: requestId as string, received };
}

test("send again makes a new request with the original's headers and an edited body, billed and logged like any", async () => {
  const { p, requestId, received } = await loggedRequest();
  const before = await used(p);
  const sent = await api<Log>(p.ownerToken, "POST", `${p.base}/requests/${requestId}/send-again`, {
    body: { encoding: "utf8", text: '{"order":2}' },
  });
  expect(sent.status).toBe(202);
  expect(sent.body.requestId).not.toBe(requestId);
  expect(sent.body.resentFrom).toBe(requestId);
  const log = await finishedLog<Log>(p, sent.body.requestId);
  expect(log.status).toBe("delivered");
  expect(received.received.map((r) => r.body)).toEqual(['{"order":1}', '{"order":2}']);
  const delivered = received.received[1];
  expect(delivered?.headers["x-order"]).toBe("1");
  // A new request is not a repeat of the first: its Idempotency-Key stays behind.
  expect(delivered?.headers["idempotency-key"]).toBeUndefined();
  expect(delivered?.headers["x-relay-request-id"]).toBe(sent.body.requestId);
  expect(await used(p)).toBe(before + 1);
  const found = await api<{ requests: Log[] }>(p.ownerToken, "GET", `${p.base}/requests`);
  expect(found.body.requests.map((r) => r.requestId)).toContain(sent.body.requestId);

  // The original's body, as Connect sends it again: no body given.
  const log2 = memberClient(RequestLogService, p.ownerToken);
  const again = await log2.sendAgain({ project: p.slug, requestId });
  expect(again.request?.resentFrom).toBe(requestId);
  await finishedLog(p, again.request?.requestId ?? "");
  expect(received.received[2]?.body).toBe('{"order":1}');
  const binary = await log2.sendAgain({
    project: p.slug,
    requestId,
    body: { encoding: BodyEncoding.BASE64, text: btoa('{"order":3}') },
  });
  await finishedLog(p, binary.request?.requestId ?? "");
  expect(received.received[3]?.body).toBe('{"order":3}');

  // The worker's log keeps the link once the request is logged (the log's write path).
  expect((await finishedLog<Log>(p, sent.body.requestId)).resentFrom).toBe(requestId);
});

test("send again checks the body against the endpoint's schema and size, and refuses what it cannot send", async () => {
  const { p, requestId } = await loggedRequest({
    schema: { type: "object", required: ["order"], properties: { order: { type: "integer" } } },
  });
  type Refusal = { error: { code: string; details?: { path: string }[] } };
  const sendAgain = (body: unknown, id = requestId) =>
    api<Refusal>(p.ownerToken, "POST", `${p.base}/requests/${id}/send-again`, body);
  const refused = async (body: unknown, id?: string) => {
    const answer = await sendAgain(body, id);
    return [answer.status, answer.body.error?.code];
  };
  expect(await refused({ body: { encoding: "utf8", text: "{not json" } })).toEqual([
    415,
    "unsupported_media_type",
  ]);
  const invalid = await sendAgain({ body: { encoding: "utf8", text: '{"order":"one"}' } });
  expect([invalid.status, invalid.body.error.code]).toEqual([422, "validation_failed"]);
  expect(invalid.body.error.details?.[0]?.path).toBe("/order");
  expect(await refused({ body: { encoding: "base64", text: "not base64!" } })).toEqual([
    400,
    "bad_request",
  ]);
  expect(await refused({ body: { encoding: "utf8", text: "x".repeat(1024 * 1024) } })).toEqual([
    413,
    "payload_too_large",
  ]);
  expect(await refused({}, "req_unknown")).toEqual([404, "not_found"]);
  // Logged before the log kept bodies: nothing to send again.
  await sql`update requests set headers = null, body = null where id = ${requestId}`;
  expect(await refused({})).toEqual([409, "conflict"]);

  const log = memberClient(RequestLogService, p.ownerToken);
  const error = await log
    .sendAgain({ project: p.slug, requestId, body: { encoding: BodyEncoding.UNSPECIFIED } })
    .catch((e: unknown) => ConnectError.from(e));
  expect(error).toMatchObject({ code: Code.InvalidArgument });
});

test("an endpoint with a target that answers its caller (sync) is not sent again", async () => {
  const answering = await target();
  const p = await projectWithEndpoint([
    { name: "s", targetUrl: answering.url, deliveryMode: "sync" },
  ]);
  const call = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  const requestId = call.headers["x-relay-request-id"] as string;
  await finishedLog(p, requestId);
  await sql`update requests set headers = '{}', body = '' where id = ${requestId}`;
  const refused = await api<{ error: { code: string } }>(
    p.ownerToken,
    "POST",
    `${p.base}/requests/${requestId}/send-again`,
  );
  expect([refused.status, refused.body.error.code]).toEqual([409, "conflict"]);
});
