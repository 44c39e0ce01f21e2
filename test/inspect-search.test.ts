/**
 * The request log's searches and what a single read shows (issue 28, inspectable requests), over
 * REST and Connect on the real stack. What the worker keeps of a request (headers, body,
 * answers) is written here by hand where a test reads it back (test/inspect-logged.test.ts has
 * the worker write it).
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, expect, test } from "vitest";
import { BodyEncoding, RequestLogService } from "../gen/relay/v1/requests_pb.ts";
import { connect } from "../store/db.ts";
import {
  api,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 1 });
const target = await targetServer((r) => ({ status: r.body.includes('"refuse"') ? 400 : 200 }));
afterAll(async () => {
  await target.close();
  await sql.end();
});

type Listed = { requests: { requestId: string }[] };

/** A project whose endpoint delivered one request and refused another (400). */
async function twoRequests() {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
  const sent = async (body: string) => {
    const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body })).json();
    await finishedLog(p, requestId);
    return requestId as string;
  };
  return { p, delivered: await sent('{"n":1}'), refused: await sent('{"refuse":true}') };
}

test("the log is found by request id, target status code and time received, over REST and Connect", async () => {
  const { p, delivered, refused } = await twoRequests();
  const ids = async (query: string) =>
    (await api<Listed>(p.ownerToken, "GET", `${p.base}/requests?${query}`)).body.requests.map(
      (r) => r.requestId,
    );
  expect(await ids(`requestId=${delivered}`)).toEqual([delivered]);
  expect(await ids("targetStatus=400")).toEqual([refused]);
  expect(await ids("targetStatus=200")).toEqual([delivered]);
  expect(await ids("targetStatus=503")).toEqual([]);
  const { body } = await api<{ receivedAt: string }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests/${refused}`,
  );
  expect(await ids(`receivedFrom=${encodeURIComponent(body.receivedAt)}`)).toEqual([refused]);
  expect(await ids(`receivedTo=${encodeURIComponent(body.receivedAt)}`)).toEqual([delivered]);
  expect(await ids(`targetStatus=400&endpoint=v1/other`)).toEqual([]);
  const failures = await api<Listed>(p.ownerToken, "GET", `${p.base}/failures?targetStatus=400`);
  expect(failures.body.requests.map((r) => r.requestId)).toEqual([refused]);

  const log = memberClient(RequestLogService, p.ownerToken);
  const listed = async (filter: Parameters<typeof log.listRequests>[0]["filter"]) =>
    (await log.listRequests({ project: p.slug, filter })).requests.map((r) => r.requestId);
  expect(await listed({ targetStatus: 400 })).toEqual([refused]);
  expect(await listed({ requestId: delivered })).toEqual([delivered]);
  const at = timestampFromDate(new Date(body.receivedAt));
  expect(await listed({ receivedFrom: at })).toEqual([refused]);
  expect(await listed({ receivedTo: at })).toEqual([delivered]);
});

test("a time before year 1 (after its offset), which no request can have been received at, bounds nothing from below and everything from above", async () => {
  const { p, delivered, refused } = await twoRequests();
  // 0000-12-31 in UTC: a date-time, yet before the first day Postgres stores.
  const yearZero = encodeURIComponent("0001-01-01T01:10:49+05:51");
  const ids = async (path: string) => {
    const listed = await api<Listed>(p.ownerToken, "GET", `${p.base}/${path}`);
    expect(listed.status).toBe(200);
    return listed.body.requests.map((r) => r.requestId);
  };
  expect(await ids(`requests?receivedFrom=${yearZero}`)).toEqual([refused, delivered]);
  expect(await ids(`requests?receivedTo=${yearZero}`)).toEqual([]);
  expect(await ids(`failures?receivedTo=${yearZero}`)).toEqual([]);
  const replay = await api(p.ownerToken, "POST", `${p.base}/failures/replay`, {
    receivedTo: "0001-01-01T01:10:49+05:51",
  });
  expect(replay.status).toBe(202);
});

test("a malformed search is 400 with the error body, naming the field", async () => {
  const { p } = await twoRequests();
  for (const [query, field] of [
    ["targetStatus=99", "targetStatus"],
    ["targetStatus=abc", "targetStatus"],
    ["receivedFrom=yesterday", "receivedFrom"],
    ["receivedTo=2026-13-01T00:00:00Z", "receivedTo"],
    [`idempotencyKey=${"k".repeat(256)}`, "idempotencyKey"],
    [`requestId=${"r".repeat(201)}`, "requestId"],
    ["idempotencyKey=%01", "idempotencyKey"],
  ] as const) {
    const refused = await api<{ error: { code: string; details: { path: string }[] } }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests?${query}`,
    );
    expect([query, refused.status, refused.body.error.code]).toEqual([query, 400, "bad_request"]);
    if (refused.body.error.details) expect(refused.body.error.details[0]?.path).toBe(field);
  }
  const log = memberClient(RequestLogService, p.ownerToken);
  const error = await log
    .listRequests({ project: p.slug, filter: { targetStatus: 600 } })
    .catch((e: unknown) => ConnectError.from(e));
  expect(error).toMatchObject({ code: Code.InvalidArgument });
});

test("a single read has the headers, body and answers the log keeps; a list page has neither", async () => {
  const { p, delivered } = await twoRequests();
  // As the worker keeps them (its write path: test/inspect-logged.test.ts).
  await sql`update requests set headers = ${sql.json({ "content-type": "application/json", "x-order": "42" })},
    body = ${Buffer.from('{"n":1}')}, idempotency_key = 'order-42' where id = ${delivered}`;
  await sql`update attempts set response_headers = ${sql.json({ "content-type": "application/json" })},
    response_body = ${Buffer.from([0xff, 0x00])}, response_truncated = true
    where request_id = ${delivered}`;

  const read = await api(p.ownerToken, "GET", `${p.base}/requests/${delivered}`);
  expect(read.body).toMatchObject({
    idempotencyKey: "order-42",
    resentFrom: null,
    headers: { "content-type": "application/json", "x-order": "42" },
    body: { encoding: "utf8", text: '{"n":1}', bytes: 7 },
    attempts: [
      {
        statusCode: 200,
        response: {
          headers: { "content-type": "application/json" },
          body: { encoding: "base64", text: "/wA=", bytes: 2 },
          truncated: true,
        },
      },
    ],
  });
  const page = await api<{ requests: Record<string, unknown>[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests?idempotencyKey=order-42`,
  );
  expect(page.body.requests.map((r) => [r.requestId, "headers" in r, "body" in r])).toEqual([
    [delivered, false, false],
  ]);

  const log = memberClient(RequestLogService, p.ownerToken);
  const { request } = await log.getRequest({ project: p.slug, requestId: delivered });
  expect(request?.idempotencyKey).toBe("order-42");
  expect(request?.headers?.values).toEqual({ "content-type": "application/json", "x-order": "42" });
  expect(request?.body).toMatchObject({ encoding: BodyEncoding.UTF8, text: '{"n":1}', bytes: 7n });
  expect(request?.attempts[0]?.response).toMatchObject({
    body: { encoding: BodyEncoding.BASE64, text: "/wA=", bytes: 2n },
    truncated: true,
  });
  const listed = await log.listRequests({
    project: p.slug,
    filter: { idempotencyKey: "order-42" },
  });
  expect(listed.requests.map((r) => [r.requestId, r.headers, r.body])).toEqual([
    [delivered, undefined, undefined],
  ]);
});
