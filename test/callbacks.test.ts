/**
 * Completion callbacks (docs/api.md "Completion callbacks"): an async call's `Relay-Callback` is
 * told each target's delivery, `Relay-Failure-Callback` each target's failure for good, with the
 * target's answer, as each target's delivery ends, signed with the endpoint's secret, retried
 * through the callback URL's outage under one `webhook-id`, and billed as a delivery. The headers never reach the target; a URL
 * that is not one, or a call that answers at once (sync), is refused.
 */
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  mintKey,
  newProject,
  type Received,
  relay,
  targetServer,
  verifiesSignature,
} from "./helpers.ts";

type Told = {
  type: string;
  data: {
    project: string;
    requestId: string;
    target: { name: string };
    status: string;
    attempts: number;
    response: { status: number; body: { text: string } } | null;
  };
};

const sink = await targetServer();
const refusing = await targetServer(() => ({ status: 400 }));
const succeeded = await targetServer();
let outage = 1;
const failedUrl = await targetServer(() => (outage-- > 0 ? { status: 503 } : { status: 200 }));
afterAll(() => Promise.all([sink.close(), refusing.close(), succeeded.close(), failedUrl.close()]));

/** A project whose endpoint `hook` has `targets`; its signing secret as its create showed it. */
async function endpointWith(targets: { name: string; targetUrl: string; deliveryMode?: string }[]) {
  const project = await newProject();
  const base = `/projects/${project.slug}`;
  await api(project.ownerToken, "POST", `${base}/lines`, { key: "v1" });
  const created = await api<{ signingSecret: string }>(
    project.ownerToken,
    "POST",
    `${base}/lines/v1/endpoints`,
    { path: "hook", targets },
  );
  expect(created.status).toBe(201);
  const p = { ...project, base };
  return { ...p, key: await mintKey(p, "live"), secret: created.body.signingSecret };
}

const used = async (p: { base: string; ownerToken: string }) =>
  (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
    .pools.live.used;

const callsFor = (server: { received: Received[] }, requestId: string) =>
  server.received.filter((r) => (JSON.parse(r.body) as Told).data.requestId === requestId);

test("each target's delivery is told to Relay-Callback with its answer, signed and billed", async () => {
  const p = await endpointWith([
    { name: "one", targetUrl: sink.url },
    { name: "two", targetUrl: `${sink.url}?two` },
  ]);
  const sent = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: '{"order":1}',
    headers: { "relay-callback": succeeded.url, "relay-failure-callback": failedUrl.url },
  });
  expect(sent.status).toBe(202);
  const { requestId } = sent.json();
  const told = await eventually(async () => {
    const calls = callsFor(succeeded, requestId);
    return calls.length === 2 && calls;
  });
  const bodies = told.map((c) => JSON.parse(c.body) as Told);
  expect(bodies.map((b) => b.data.target.name).sort()).toEqual(["one", "two"]);
  for (const body of bodies) {
    expect(body).toMatchObject({
      type: "delivery.succeeded",
      data: {
        project: p.slug,
        status: "delivered",
        attempts: 1,
        response: { status: 200, body: { text: '{"ok":true}' } },
      },
    });
  }
  for (const call of told) expect(await verifiesSignature(p.secret, call)).toBe(true);
  expect(new Set(told.map((c) => c.headers["webhook-id"])).size).toBe(2);
  expect(callsFor(failedUrl, requestId)).toEqual([]);
  for (const delivery of sink.received.slice(-2)) {
    expect(Object.keys(delivery.headers)).not.toContain("relay-callback");
    expect(Object.keys(delivery.headers)).not.toContain("relay-failure-callback");
  }
  // Two deliveries and two callbacks, a credit each.
  await eventually(async () => (await used(p)) === 4);
});

test("a target that got the call is told at once, while another target's delivery still retries", async () => {
  let slowAnswers = 0;
  const slow = await targetServer(() =>
    slowAnswers++ === 0 ? { status: 503, headers: { "retry-after": "3" } } : { status: 200 },
  );
  const p = await endpointWith([
    { name: "quick", targetUrl: sink.url },
    { name: "slow", targetUrl: slow.url },
  ]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { "relay-callback": succeeded.url },
    })
  ).json();
  const toldOf = (name: string) =>
    callsFor(succeeded, requestId).filter(
      (c) => (JSON.parse(c.body) as Told).data.target.name === name,
    );
  await eventually(async () => toldOf("quick").length === 1);
  expect(slow.received).toHaveLength(1);
  expect(toldOf("slow")).toEqual([]);
  await eventually(async () => toldOf("slow").length === 1, 30_000);
  expect(slow.received).toHaveLength(2);
  await slow.close();
});

test("a failure for good is told to Relay-Failure-Callback, retried through its outage under one id", async () => {
  const p = await endpointWith([{ name: "strict", targetUrl: refusing.url }]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { "relay-callback": succeeded.url, "relay-failure-callback": failedUrl.url },
    })
  ).json();
  const told = await eventually(async () => {
    const calls = callsFor(failedUrl, requestId);
    return calls.length === 2 && calls;
  }, 60_000);
  expect(told[0]?.headers["webhook-id"]).toBe(told[1]?.headers["webhook-id"]);
  expect(JSON.parse(told[1]?.body ?? "{}")).toMatchObject({
    type: "delivery.failed",
    data: { status: "failed", attempts: 1, response: { status: 400 } },
  });
  expect(callsFor(succeeded, requestId)).toEqual([]);
  // The delivery and its callback: charged once each, the callback's retry free.
  expect(await used(p)).toBe(2);
  // The request's log shows how its callback went.
  const log = await api<{ callbacks: unknown[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests/${requestId}`,
  );
  expect(log.body.callbacks).toEqual([
    expect.objectContaining({
      replay: 0,
      kind: "failed",
      url: failedUrl.url,
      tries: 2,
      statusCode: 200,
      error: null,
      sent: true,
    }),
  ]);

  // A replay's end calls back too, under an id of its own.
  const replayed = await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);
  expect(replayed.status).toBe(202);
  const again = await eventually(async () => callsFor(failedUrl, requestId)[2]);
  expect(again.headers["webhook-id"]).not.toBe(told[0]?.headers["webhook-id"]);
  expect(JSON.parse(again.body)).toMatchObject({ data: { status: "failed", attempts: 1 } });
});

test("a callback that is not a URL Relay may call, or on a call answered at once, is refused", async () => {
  const p = await endpointWith([{ name: "t", targetUrl: sink.url }]);
  for (const url of ["ftp://example.com/x", "not a url", `https://user:pw@example.com/`]) {
    const refused = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { "relay-callback": url },
    });
    expect(refused.status).toBe(400);
    expect(refused.json()).toMatchObject({ error: { code: "bad_request" } });
  }
  const sync = await endpointWith([{ name: "rpc", targetUrl: sink.url, deliveryMode: "sync" }]);
  const refused = await relay(sync.slug, "/v1/hook", {
    key: sync.key,
    body: "{}",
    headers: { "relay-failure-callback": succeeded.url },
  });
  expect(refused.status).toBe(400);
  expect(refused.text).toContain("async endpoints only");
});
