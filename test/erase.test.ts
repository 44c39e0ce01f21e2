/**
 * Erasing what the log keeps of a request (docs/api.md "Erasing a request's content"): `DELETE
 * {base_url}/requests/{id}/content` takes a finished request's body, headers and its targets'
 * answers out of the log at once, a body stored by reference included; its status, attempts and
 * timings stay. An erased request is neither replayed nor sent again (its content is gone), one
 * still under way is refused (409), and another project's is not found. A project's owner may set
 * how many days its requests' content is kept at all (`PUT .../retention`, bounded per plan);
 * the daily run erases what is older, on the dev clock here.
 */
import { afterAll, expect, test } from "vitest";
import { RETENTION_WORKFLOW } from "../core/temporal.ts";
import { RequestLogService } from "../gen/relay/v1/requests_pb.ts";
import { runScheduledNow } from "../platform/temporal.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

type Erased = {
  status: string;
  contentErasedAt: string | null;
  headers: Record<string, string> | null;
  body: { text: string } | null;
  attempts: { statusCode: number | null; response: { headers: Record<string, string> } | null }[];
};

const sql = connect(stack().databaseUrl, { max: 1 });
const temporal = await relayTemporal();
const sink = await targetServer();
let failing = 0;
const down = await targetServer(() => {
  failing++;
  return { status: 503 };
});
afterAll(async () => {
  await Promise.all([sink.close(), down.close()]);
  await sql.end();
  await temporal.connection.close();
});

const erase = (p: { ownerToken: string; base: string }, requestId: string, token = p.ownerToken) =>
  api<Erased>(token, "DELETE", `${p.base}/requests/${requestId}/content`);

test("an erased request's body, headers and answers are gone from the log; its attempts stay", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  const large = JSON.stringify({ email: "someone@example.com", pad: "x".repeat(300 * 1024) });
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: large, headers: { "x-customer": "c-7" } })
  ).json();
  const before = await finishedLog<Erased>(p, requestId);
  expect(before.body?.text).toContain("someone@example.com");
  expect(before.contentErasedAt).toBeNull();
  const stored = async () =>
    (await sql`select 1 from bodies where request_id = ${requestId}`).length;
  expect(await stored()).toBe(1);

  const erased = await erase(p, requestId);
  expect(erased.status).toBe(200);
  expect(erased.body.contentErasedAt).not.toBeNull();
  const read = (await api<Erased>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`)).body;
  for (const view of [erased.body, read]) {
    expect(view.status).toBe("delivered");
    expect(view.headers).toBeNull();
    expect(view.body).toBeNull();
    expect(view.attempts).toHaveLength(1);
    expect(view.attempts[0]?.statusCode).toBe(200);
    expect(view.attempts[0]?.response).toBeNull();
  }
  expect(await stored()).toBe(0);
  const [row] = await sql`
    select headers, body, (select count(*) from attempts a
      where a.request_id = r.id and (a.response_headers is not null or a.response_body is not null))
      as answers
    from requests r where id = ${requestId}`;
  expect(row).toEqual({ headers: null, body: null, answers: "0" });

  // Nothing is left to send: a replay and a send-again are refused, and erasing again answers the same.
  const replay = await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);
  expect(replay.status).toBe(409);
  expect(replay.text).toContain("erased");
  const again = await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/send-again`, {});
  expect(again.status).toBe(409);
  expect(again.text).toContain("erased");
  expect(sink.received).toHaveLength(1);
  const twice = await erase(p, requestId);
  expect(twice.status).toBe(200);
  expect(twice.body.contentErasedAt).toBe(erased.body.contentErasedAt);
});

test("a request still under way is not erased, and another project's is not found", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: down.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"a":1}' })).json();
  await eventually(async () => failing > 0);
  const refused = await erase(p, requestId);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ error: { code: "conflict" } });
  const kept = await api<Erased>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
  expect(kept.body.body?.text).toBe('{"a":1}');

  const other = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  expect((await erase(other, requestId)).status).toBe(404);
  expect((await erase(p, "req_none")).status).toBe(404);
  const cancelled = await api(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancelled.status).toBe(200);
  expect((await finishedLog(p, requestId)).status).toBe("cancelled");
  expect((await erase(p, requestId)).status).toBe(200);
});

test("a project keeps its requests' content as many days as its owner sets, within its plan", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  const keeping = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  const retention = `${p.base}/retention`;
  expect((await api(p.ownerToken, "GET", retention)).body).toEqual({
    retentionDays: null,
    maxRetentionDays: 365,
  });
  const editor = await api<{ token: string }>(p.ownerToken, "POST", `${p.base}/members`, {
    name: "ed",
    role: "editor",
  });
  expect((await api(editor.body.token, "PUT", retention, { retentionDays: 2 })).status).toBe(403);
  for (const retentionDays of [0, 366, 1.5, "2"]) {
    const refused = await api(p.ownerToken, "PUT", retention, { retentionDays });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { details: [{ path: "retentionDays" }] } });
  }
  const free = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }], {}, "free");
  const tooLong = await api(free.ownerToken, "PUT", `${free.base}/retention`, {
    retentionDays: 31,
  });
  expect(tooLong.status).toBe(400);
  expect(tooLong.text).toContain("at most 30 days");
  const set = await memberClient(RequestLogService, p.ownerToken).setRetention({
    project: p.slug,
    retentionDays: 2,
  });
  expect(set.retention).toMatchObject({ retentionDays: 2, maxRetentionDays: 365 });

  const sent = async (project: typeof p) => {
    const { requestId } = (
      await relay(project.slug, "/v1/hook", { key: project.key, body: '{"a":1}' })
    ).json();
    await finishedLog(project, requestId);
    return requestId as string;
  };
  const [old, kept] = [await sent(p), await sent(keeping)];
  const admin = (path: string, body?: unknown) => api(stack().adminToken, "POST", path, body);
  expect((await admin("/admin/clock", { advanceSeconds: 3 * 86_400 })).status).toBe(200);
  const recent = await sent(p);
  const pruned = await runScheduledNow<{ content: number }>(temporal, RETENTION_WORKFLOW);
  expect(pruned.content).toBeGreaterThanOrEqual(1);

  const read = async (project: typeof p, requestId: string) =>
    (await api<Erased>(project.ownerToken, "GET", `${project.base}/requests/${requestId}`)).body;
  expect(await read(p, old)).toMatchObject({ status: "delivered", body: null, headers: null });
  expect((await read(p, old)).contentErasedAt).not.toBeNull();
  for (const [project, requestId] of [
    [p, recent],
    [keeping, kept],
  ] as const) {
    expect(await read(project, requestId)).toMatchObject({
      contentErasedAt: null,
      body: { text: '{"a":1}' },
    });
  }
});
