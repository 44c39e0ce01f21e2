/**
 * The request log's read side (issue 28, inspectable requests), on the test stack's Postgres with
 * rows written by hand: what a single read shows of a request and its answers, and the searches.
 */
import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { connect } from "./db.ts";
import { findRequest, listRequests, type RequestFilter } from "./request-views.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const project = newId("prj");
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'views', 'free')`;
afterAll(async () => {
  await sql`delete from bodies where project_id = ${project}`;
  await sql`delete from projects where id = ${project}`;
  await sql.end();
});

const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 12, minute));

/** A request logged at `minute`, with the columns given; answers its id. */
async function logged(
  minute: number,
  columns: {
    headers?: Record<string, string>;
    body?: Uint8Array;
    idempotencyKey?: string;
    resentFrom?: string;
    endpoint?: string;
    status?: string;
  } = {},
): Promise<string> {
  const id = newId("req");
  await sql`
    insert into requests (id, project_id, line_key, endpoint_path, key_mode, status, body_bytes,
      received_at, headers, body, idempotency_key, resent_from)
    values (${id}, ${project}, 'v1', ${columns.endpoint ?? "hook"}, 'live',
      ${columns.status ?? "delivered"}, ${columns.body?.byteLength ?? 0}, ${at(minute)},
      ${columns.headers ? sql.json(columns.headers) : null},
      ${columns.body ? Buffer.from(columns.body) : null}, ${columns.idempotencyKey ?? null},
      ${columns.resentFrom ?? null})`;
  return id;
}

async function attempt(
  requestId: string,
  statusCode: number | null,
  answer?: { headers: Record<string, string>; body: Uint8Array; truncated?: boolean },
) {
  await sql`
    insert into attempts (request_id, target_id, target_name, attempt, started_at, status_code,
      latency_ms, response_headers, response_body, response_truncated)
    values (${requestId}, 't', 't', 1, now(), ${statusCode}, 5,
      ${answer ? sql.json(answer.headers) : null},
      ${answer ? Buffer.from(answer.body) : null}, ${answer?.truncated ?? false})`;
}

const text = (s: string) => new TextEncoder().encode(s);

test("a single read has the request's headers, body and each attempt's answer; a list has neither", async () => {
  const id = await logged(1, {
    headers: { "content-type": "application/json", "x-order": "42" },
    body: text('{"order":42}'),
    idempotencyKey: "order-42",
  });
  await attempt(id, null);
  await attempt(id, 200, {
    headers: { "content-type": "application/octet-stream" },
    body: new Uint8Array([0xff, 0xfe, 0x00]),
    truncated: true,
  });

  const one = await findRequest(sql, project, id);
  expect(one).toMatchObject({
    idempotencyKey: "order-42",
    resentFrom: null,
    headers: { "content-type": "application/json", "x-order": "42" },
    body: { encoding: "utf8", text: '{"order":42}', bytes: 12 },
  });
  expect(one?.attempts.map((a) => a.response)).toEqual([
    null,
    {
      headers: { "content-type": "application/octet-stream" },
      body: { encoding: "base64", text: "//4A", bytes: 3 },
      truncated: true,
    },
  ]);

  const [listed] = await listRequests(sql, project, { ...every, requestId: id });
  expect(listed).toMatchObject({ requestId: id, idempotencyKey: "order-42" });
  expect(listed && ["headers", "body"].filter((field) => field in listed)).toEqual([]);
  expect(listed?.attempts.every((a) => !("response" in a))).toBe(true);
});

test("a body stored by reference reads from `bodies`; a request logged before 016 has none", async () => {
  const large = await logged(2, { headers: {} });
  await sql`insert into bodies (request_id, project_id, body)
    values (${large}, ${project}, ${Buffer.from(text("by reference"))})`;
  expect((await findRequest(sql, project, large))?.body).toEqual({
    encoding: "utf8",
    text: "by reference",
    bytes: 12,
  });
  const old = await logged(3);
  expect(await findRequest(sql, project, old)).toMatchObject({ headers: null, body: null });
});

const every: RequestFilter = {
  statuses: ["delivered", "failed", "partially_failed", "delivering"],
  limit: 100,
};

test("requests are found by id, Idempotency-Key, target status code, endpoint, status and time", async () => {
  const first = await logged(10, { idempotencyKey: "k-1" });
  await attempt(first, 503);
  await attempt(first, 200);
  const second = await logged(20, { idempotencyKey: "k-2", endpoint: "other", status: "failed" });
  await attempt(second, 400);
  const third = await logged(30, { resentFrom: first });
  const ids = async (filter: Partial<RequestFilter>) =>
    (await listRequests(sql, project, { ...every, ...filter })).map((r) => r.requestId);
  const window = { receivedFrom: at(10), receivedTo: at(31) };

  expect(await ids({ requestId: second })).toEqual([second]);
  expect(await ids({ idempotencyKey: "k-1" })).toEqual([first]);
  expect(await ids({ targetStatus: 503, ...window })).toEqual([first]);
  expect(await ids({ targetStatus: 400, ...window })).toEqual([second]);
  expect(await ids({ ...window })).toEqual([third, second, first]);
  expect(await ids({ receivedFrom: at(20), receivedTo: at(30) })).toEqual([second]);
  expect(await ids({ ...window, endpoint: { line: "v1", path: "other" } })).toEqual([second]);
  expect(await ids({ ...window, statuses: ["failed"] })).toEqual([second]);
  expect((await listRequests(sql, project, { ...every, requestId: third }))[0]?.resentFrom).toBe(
    first,
  );
  // Another project's request is never found by its id.
  expect(await listRequests(sql, newId("prj"), { ...every, requestId: first })).toEqual([]);
});

test("a search by Idempotency-Key or target status code runs on an index", async () => {
  const plans = await sql.begin(async (tx) => {
    // Tiny tables: without this the planner rightly scans them whole.
    await tx`set local enable_seqscan = off`;
    const plan = async (query: string) =>
      (await tx.unsafe(`explain ${query}`)).map((row) => Object.values(row)[0]).join("\n");
    return [
      await plan(
        `select id from requests where project_id = '${project}' and idempotency_key = 'k-1'`,
      ),
      await plan(`select id from requests where project_id = '${project}' and exists (
        select 1 from attempts a where a.request_id = requests.id and a.status_code = 503)
        order by received_at desc, id desc limit 50`),
    ];
  });
  expect(plans[0]).toContain("requests_idempotency_key");
  expect(plans[1]).toContain("attempts_request");
});
