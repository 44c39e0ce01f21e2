/**
 * Delayed delivery and cancel, against the real stack: a delayed request waits (scheduled, in the
 * log and the Temporal UI) and arrives no earlier than asked; a cancelled one never arrives and is
 * not billed; bad values get a 400 and queue nothing.
 */
import { createServer } from "node:http";
import { WorkflowNotFoundError } from "@temporalio/client";
import { defineSearchAttributeKey } from "@temporalio/common";
import { afterAll, expect, test } from "vitest";
import { searchAttributes } from "../core/temporal.ts";
import { RequestLogService, RequestStatus } from "../gen/relay/v1/requests_pb.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  newProject,
  projectWithEndpoint,
  type RequestLog,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

type Log = RequestLog & { requestId: string; receivedAt: string; notBefore: string | null };
type Usage = { pools: { live: { used: number } } };

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

async function target(respond?: Parameters<typeof targetServer>[0]) {
  const server = await targetServer(respond);
  closers.push(server.close);
  return server;
}

const temporal = await relayTemporal();
closers.push(() => temporal.connection.close());
const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");

const logOf = async (p: { base: string; ownerToken: string }, requestId: string) =>
  (await api<Log>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`)).body;
const used = async (p: { base: string; ownerToken: string }) =>
  (await api<Usage>(p.ownerToken, "GET", `${p.base}/usage`)).body.pools.live.used;
/** The stack's time: real time plus the dev clock's offset (other tests may move it). */
const stackNow = async () => {
  const clock = await api(stack().adminToken, "POST", "/admin/clock", { advanceSeconds: 0 });
  return Date.now() + (clock.body.offsetMs as number);
};

test("a delayed request is 202 scheduled, waits as such, and arrives no earlier than asked", async () => {
  const later = await target();
  const p = await projectWithEndpoint([{ name: "later", targetUrl: later.url }]);
  const sent = Date.now();
  const answer = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: '{"n":1}',
    headers: { "Relay-Delay": "3s" },
  });
  expect(answer.status).toBe(202);
  const { status, requestId } = answer.json();
  expect(status).toBe("scheduled");

  const waiting = await eventually(async () => {
    const log = await logOf(p, requestId);
    return log.status === "scheduled" && log;
  });
  // Received a moment after the delay was read, so up to that moment less than 3 s before.
  const asked = Date.parse(waiting.notBefore ?? "") - Date.parse(waiting.receivedAt);
  expect(asked).toBeGreaterThan(2900);
  expect(asked).toBeLessThanOrEqual(3000);
  expect(waiting.attempts).toEqual([]);
  // Its workflow is started just after the 202 (the log reads its kept start until then).
  const workflowStatus = () =>
    temporal.workflow
      .getHandle(requestId)
      .describe()
      .then((workflow) => workflow.typedSearchAttributes.get(statusKey))
      .catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) return undefined;
        throw error;
      });
  expect(await eventually(workflowStatus)).toBe("scheduled");

  const log = await finishedLog<Log>(p, requestId);
  expect(log.status).toBe("delivered");
  expect(later.received).toHaveLength(1);
  expect((later.received[0]?.at ?? 0) - sent).toBeGreaterThanOrEqual(3000);
  expect(later.received[0]?.headers["relay-delay"]).toBeUndefined();

  // The same by time: two seconds ahead on the stack's clock.
  const at = new Date((await stackNow()) + 2000);
  const timed = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: '{"n":2}',
    headers: { "Relay-Not-Before": at.toISOString() },
  });
  const sentAt = Date.now();
  expect(timed.json().status).toBe("scheduled");
  const timedLog = await finishedLog<Log>(p, timed.json().requestId);
  expect(timedLog.notBefore).toBe(at.toISOString());
  expect(timedLog.status).toBe("delivered");
  expect((later.received[1]?.at ?? 0) - sentAt).toBeGreaterThanOrEqual(1500);
});

test("a bad delay is a 400 with the error body and queues nothing", async () => {
  const never = await target();
  const p = await projectWithEndpoint([{ name: "never", targetUrl: never.url }]);
  const sync = await projectWithEndpoint([
    { name: "answers", targetUrl: never.url, deliveryMode: "sync" },
  ]);
  const asks: [typeof p, Record<string, string>, RegExp][] = [
    [p, { "Relay-Delay": "8d" }, /at most 7 days/],
    [p, { "Relay-Delay": "soon" }, /whole number of s, m, h or d/],
    [p, { "Relay-Not-Before": "tomorrow" }, /RFC 3339/],
    [
      p,
      { "Relay-Not-Before": new Date((await stackNow()) + 8 * 86_400_000).toISOString() },
      /7 days/,
    ],
    [p, { "Relay-Delay": "1m", "Relay-Not-Before": "2030-01-01T00:00:00Z" }, /not both/],
    [sync, { "Relay-Delay": "30s" }, /async endpoints only/],
  ];
  for (const [project, headers, message] of asks) {
    const answer = await relay(project.slug, "/v1/hook", { key: project.key, body: "{}", headers });
    expect(answer.status).toBe(400);
    expect(answer.json()).toEqual({ error: { code: "bad_request", message: expect.any(String) } });
    expect(answer.json().error.message).toMatch(message);
  }
  for (const project of [p, sync]) {
    const log = await api<{ requests: unknown[] }>(
      project.ownerToken,
      "GET",
      `${project.base}/requests`,
    );
    expect(log.body.requests).toEqual([]);
  }
  expect(never.received).toEqual([]);
});

test("a cancelled scheduled request never arrives, is not billed, and ends cancelled", async () => {
  const never = await target();
  const p = await projectWithEndpoint([{ name: "never", targetUrl: never.url }]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", headers: { "Relay-Delay": "1h" } })
  ).json();
  const usedBefore = await used(p);

  const cancelled = await api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body).toMatchObject({ requestId, status: "cancelled", attempts: [] });
  const again = await api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(again.status).toBe(200);
  expect(again.body.status).toBe("cancelled");

  const handle = temporal.workflow.getHandle(requestId);
  expect(await handle.result()).toBe("cancelled");
  expect((await handle.describe()).typedSearchAttributes.get(statusKey)).toBe("cancelled");
  expect(await used(p)).toBe(usedBefore);
  expect(never.received).toEqual([]);
});

test("a request between retries is cancelled: no attempt after the cancel", async () => {
  const down = await target(() => ({ status: 503, headers: { "retry-after": "60" } }));
  const p = await projectWithEndpoint([{ name: "down", targetUrl: down.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  // Its first attempt, logged.
  await eventually(async () => (await logOf(p, requestId)).attempts?.length === 1);

  const cancelled = await api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.status).toBe("cancelled");
  expect(cancelled.body.attempts.map((a) => a.statusCode)).toEqual([503]);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("cancelled");
  expect(down.received).toHaveLength(1);
});

test("a request cancelled while its attempt waits for its retry's backoff ends cancelled", async () => {
  // No Retry-After: the attempt's activity is retried by Temporal after 1 s, 2 s...; a cancel in
  // that wait is the server's own (its note once failed the workflow's task for good).
  const down = await target(() => ({ status: 503 }));
  const p = await projectWithEndpoint([{ name: "down", targetUrl: down.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await eventually(async () => (await logOf(p, requestId)).attempts?.length === 2);

  const cancelled = await api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancelled.status).toBe(200);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("cancelled");
  expect((await logOf(p, requestId)).status).toBe("cancelled");
  const attempts = down.received.length;
  await new Promise((resolve) => setTimeout(resolve, 2500));
  expect(down.received).toHaveLength(attempts);
});

test("cancel answers 409 for a delivered request and 404 for one the project does not have", async () => {
  const fine = await target();
  const p = await projectWithEndpoint([{ name: "fine", targetUrl: fine.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await finishedLog(p, requestId);

  const delivered = await api(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(delivered.status).toBe(409);
  expect(delivered.body).toEqual({
    error: { code: "request_already_delivered", message: expect.any(String) },
  });
  expect((await logOf(p, requestId)).status).toBe("delivered");

  const unknown = await api(p.ownerToken, "DELETE", `${p.base}/requests/req_unknown`);
  expect(unknown.status).toBe(404);
  // Longer than any workflow id Temporal takes: still just no such request.
  const long = await api(p.ownerToken, "DELETE", `${p.base}/requests/req_${"x".repeat(2000)}`);
  expect(long.status).toBe(404);
  const other = await newProject();
  const elsewhere = await api(
    other.ownerToken,
    "DELETE",
    `/projects/${other.slug}/requests/${requestId}`,
  );
  expect(elsewhere.status).toBe(404);
});

test("Connect's CancelRequest cancels a scheduled request, as the REST call does", async () => {
  const never = await target();
  const p = await projectWithEndpoint([{ name: "never", targetUrl: never.url }]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", headers: { "Relay-Delay": "10m" } })
  ).json();
  const client = memberClient(RequestLogService, p.ownerToken);
  const { request } = await client.cancelRequest({ project: p.slug, requestId });
  expect(request?.status).toBe(RequestStatus.CANCELLED);
  expect(request?.notBefore).toBeDefined();
  expect(never.received).toEqual([]);
});

/**
 * A target that answers with the status `answer` resolves to (told which request it is, from 1);
 * a caller that left by then is not answered at all.
 */
async function heldTarget(answer: (n: number) => Promise<number>) {
  const received: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received.push(Date.now());
      void answer(received.length).then((status) => {
        if (!res.destroyed) res.writeHead(status, { "content-type": "application/json" }).end("{}");
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/in`, received };
}

const after = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

test("a 2xx racing a cancel wins: a first attempt that answers 200 after the cancel leaves the request delivered, the cancel 409, one charge", async () => {
  const slow = await heldTarget(async () => {
    await after(3000);
    return 200;
  });
  const p = await projectWithEndpoint([{ name: "slow", targetUrl: slow.url, timeoutSeconds: 30 }]);
  const usedBefore = await used(p);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await eventually(async () => slow.received.length === 1);
  await after(1000);

  const cancel = await api(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancel.status).toBe(409);
  expect(cancel.body).toEqual({
    error: { code: "request_already_delivered", message: expect.any(String) },
  });
  const log = await finishedLog<Log>(p, requestId);
  expect(log.status).toBe("delivered");
  expect(log.attempts.filter((a) => a.statusCode === 200)).toHaveLength(1);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("delivered");
  expect(await used(p)).toBe(usedBefore + 1);
}, 60_000);

test("a 2xx racing a cancel wins between retries too: a retry that answers 200 after the cancel leaves the request delivered", async () => {
  let cancelSent: () => void = () => {};
  const cancelling = new Promise<void>((resolve) => {
    cancelSent = resolve;
  });
  // 503 first; the retry is answered 200 a moment after the cancel went out.
  const flaky = await heldTarget(async (n) => {
    if (n === 1) return 503;
    await cancelling;
    await after(500);
    return 200;
  });
  const p = await projectWithEndpoint([{ name: "flaky", targetUrl: flaky.url }]);
  const usedBefore = await used(p);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await eventually(async () => flaky.received.length === 2);

  const cancel = api(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  cancelSent();
  expect((await cancel).status).toBe(409);
  expect((await cancel).body).toMatchObject({ error: { code: "request_already_delivered" } });
  const log = await finishedLog<Log>(p, requestId);
  expect(log.status).toBe("delivered");
  expect(log.attempts.map((a) => a.statusCode)).toEqual([503, 200]);
  expect(await used(p)).toBe(usedBefore + 1);
}, 60_000);

test("a cancel that wins over an attempt in flight: cancelled, no 2xx attempt, no charge", async () => {
  const hanging = await heldTarget(async () => {
    await after(40_000);
    return 200;
  });
  const p = await projectWithEndpoint([
    { name: "hanging", targetUrl: hanging.url, timeoutSeconds: 60 },
  ]);
  const usedBefore = await used(p);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await eventually(async () => hanging.received.length === 1);

  const cancel = await api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
  expect(cancel.status).toBe(200);
  expect(cancel.body.status).toBe("cancelled");
  const log = await finishedLog<Log>(p, requestId);
  expect(log.status).toBe("cancelled");
  expect(log.attempts.every((a) => a.statusCode === null)).toBe(true);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("cancelled");
  expect(await used(p)).toBe(usedBefore);
}, 90_000);
