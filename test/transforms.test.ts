/**
 * Per-target transformations: a JavaScript function `(request) => request` that changes the body,
 * headers, path and query a target receives, or drops the call, in async, sync and stream mode
 * alike. One that throws, loops or allocates without bound fails that delivery with its reason
 * in the log, and leaves another tenant's calls delivered. Checked when saved.
 */
import { afterAll, describe, expect, test } from "vitest";
import { BATCH_WORKFLOW, searchAttributes } from "../core/temporal.ts";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  targetServer,
} from "./helpers.ts";

const target = await targetServer();
afterAll(() => target.close());

type Logged = {
  status: string;
  attempts: { targetName: string; statusCode: number | null; error: string | null }[];
  skipped: { targetName: string; reason: string }[];
};
type Usage = { pools: { live: { used: number; held: number } } };

const RESHAPE = `(request) => ({
  ...request,
  path: request.path + "/orders",
  query: { ...request.query, v: "2" },
  headers: { ...request.headers, "x-order-id": String(request.body.id) },
  body: { order: request.body, source: request.headers["x-source"] ?? "none" },
})`;

const DROP_UNPAID = `(request) => request.body.status === "paid" ? request : null`;

const receivedWith = (id: string) => target.received.filter((r) => r.body.includes(id));
const usage = async (p: { base: string; ownerToken: string }) =>
  (await api<Usage>(p.ownerToken, "GET", `${p.base}/usage`)).body.pools.live;
/** A call's request id, from its header: a sync or stream answer's body is its target's own. */
const requestIdOf = (answer: { headers: Record<string, string | string[] | undefined> }) =>
  String(answer.headers["x-relay-request-id"]);

describe("a transformation changes what its target receives", () => {
  for (const deliveryMode of ["async", "sync", "stream"] as const) {
    test(`the body, a header, the path and the query, ${deliveryMode}`, async () => {
      const p = await projectWithEndpoint([
        { name: "shop", targetUrl: `${target.url}?tenant=a`, deliveryMode, transform: RESHAPE },
      ]);
      const id = `reshape-${deliveryMode}`;
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id }),
        headers: { "X-Source": "checkout" },
      });
      expect(answer.status).toBe(deliveryMode === "async" ? 202 : 200);
      const [got] = await eventually(async () => receivedWith(id).length > 0 && receivedWith(id));
      expect(got?.path).toBe("/in/orders?tenant=a&v=2");
      expect(got?.headers["x-order-id"]).toBe(id);
      expect(JSON.parse(got?.body ?? "")).toEqual({ order: { id }, source: "checkout" });
      const log = await finishedLog<Logged>(p, requestIdOf(answer));
      expect(log.status).toBe("delivered");
    });
  }
});

test("calls the edge batches are transformed and dropped alike", async () => {
  const p = await projectWithEndpoint([
    {
      name: "evens",
      targetUrl: target.url,
      transform: "(r) => r.body.i % 2 ? null : { ...r, body: { even: r.body.i, tag: r.body.tag } }",
    },
  ]);
  const tag = "batched-transform";
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: JSON.stringify({ i, tag }) }),
    ),
  );
  const logs = await Promise.all(answers.map((a) => finishedLog<Logged>(p, requestIdOf(a))));
  expect(logs.map((l) => l.status)).toEqual(logs.map((_, i) => (i % 2 ? "skipped" : "delivered")));
  const evens = receivedWith(tag).map((r) => JSON.parse(r.body).even);
  expect(evens.sort((a, b) => a - b)).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]);
  // Through a batch's first attempts (visibility lists it a moment later).
  const temporal = await relayTemporal();
  const query = `WorkflowType = "${BATCH_WORKFLOW}" AND ${searchAttributes.project} = "${p.slug}"`;
  await eventually(async () => {
    for await (const _ of temporal.workflow.list({ query })) return true;
    return false;
  });
  await temporal.connection.close();
});

describe("a transformation that returns null drops the call", () => {
  test("async: the target is skipped, named in the log, not charged", async () => {
    const p = await projectWithEndpoint([
      { name: "paid-only", targetUrl: target.url, transform: DROP_UNPAID },
      { name: "everything", targetUrl: target.url },
    ]);
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: JSON.stringify({ id: "drop-async", status: "pending" }),
    });
    expect(answer.status).toBe(202);
    const log = await finishedLog<Logged>(p, requestIdOf(answer));
    expect(log.status).toBe("delivered");
    expect(log.skipped).toEqual([
      expect.objectContaining({ targetName: "paid-only", reason: "transform" }),
    ]);
    expect(receivedWith("drop-async")).toHaveLength(1);
    await eventually(async () => (await usage(p)).held === 0);
    expect((await usage(p)).used).toBe(1);
  });

  for (const deliveryMode of ["sync", "stream"] as const) {
    test(`${deliveryMode}: answered 200 skipped at once, logged skipped, not charged`, async () => {
      const p = await projectWithEndpoint([
        { name: "paid-only", targetUrl: target.url, deliveryMode, transform: DROP_UNPAID },
      ]);
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id: `drop-${deliveryMode}`, status: "pending" }),
      });
      expect(answer.status).toBe(200);
      expect(answer.json()).toEqual({ status: "skipped", requestId: requestIdOf(answer) });
      const log = await finishedLog<Logged>(p, requestIdOf(answer));
      expect(log).toMatchObject({
        status: "skipped",
        skipped: [{ targetName: "paid-only", reason: "transform" }],
      });
      expect(receivedWith(`drop-${deliveryMode}`)).toEqual([]);
      // (A stream's edge keeps a hold for the project's next stream: only the charge counts.)
      expect((await usage(p)).used).toBe(0);
    });
  }
});

describe("a transformation that fails fails its delivery, with the reason", () => {
  const failing = {
    throws: ["(request) => { throw new Error('no such field') }", /threw Error: no such field/],
    loops: ["(request) => { for (;;) {} }", /ran past 50 ms/],
    allocates: [
      "(request) => { const all = []; for (;;) all.push(new Array(1e5).fill(request)); }",
      /ran out of its 64 MiB|ran past 50 ms/,
    ],
  } as const;
  for (const [what, [transform, reason]] of Object.entries(failing)) {
    test(`one that ${what}: failed for good, not retried, not charged`, async () => {
      const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url, transform }]);
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id: `fails-${what}` }),
      });
      const log = await finishedLog<Logged>(p, requestIdOf(answer));
      expect(log.status).toBe("failed");
      expect(log.attempts).toHaveLength(1);
      expect(log.attempts[0]?.statusCode).toBeNull();
      expect(log.attempts[0]?.error).toMatch(reason);
      expect(receivedWith(`fails-${what}`)).toEqual([]);
      await eventually(async () => (await usage(p)).held === 0);
      expect((await usage(p)).used).toBe(0);
    });
  }

  test("sync: the caller gets 502 transform_failed with the reason", async () => {
    const p = await projectWithEndpoint([
      { name: "t", targetUrl: target.url, deliveryMode: "sync", transform: "(r) => r.nope.deeper" },
    ]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(answer.status).toBe(502);
    expect(answer.json()).toMatchObject({
      error: { code: "transform_failed", message: expect.stringMatching(/TypeError/) },
    });
  });

  test("a tenant whose transformation loops leaves another tenant's calls delivered", async () => {
    const hostile = await projectWithEndpoint([
      { name: "t", targetUrl: target.url, transform: "(request) => { for (;;) {} }" },
    ]);
    const other = await projectWithEndpoint([
      { name: "t", targetUrl: target.url, transform: "(request) => request" },
    ]);
    const flood = Array.from({ length: 20 }, (_, i) =>
      relay(hostile.slug, "/v1/hook", { key: hostile.key, body: JSON.stringify({ i }) }),
    );
    const calls = Array.from({ length: 10 }, (_, i) =>
      relay(other.slug, "/v1/hook", { key: other.key, body: JSON.stringify({ id: `calm-${i}` }) }),
    );
    const answers = await Promise.all([...flood, ...calls]);
    const logs = await Promise.all(
      answers.slice(flood.length).map((a) => finishedLog<Logged>(other, requestIdOf(a))),
    );
    expect(logs.map((l) => l.status)).toEqual(logs.map(() => "delivered"));
    for (const a of answers.slice(0, flood.length)) {
      expect((await finishedLog<Logged>(hostile, requestIdOf(a))).status).toBe("failed");
    }
  });
});

describe("a transformation is checked when saved", () => {
  test("one that does not compile, or is not a function, is 400 with details", async () => {
    const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
    for (const [transform, message] of [
      ["(request) => {", /SyntaxError/],
      ["42", /not a function/],
      [`(r) => r // ${"x".repeat(33 * 1024)}`, /at most 32768 bytes/],
    ] as const) {
      const saved = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
        targets: [{ name: "t", targetUrl: target.url, transform }],
      });
      expect(saved.status).toBe(400);
      expect(saved.body).toMatchObject({
        error: {
          code: "bad_request",
          details: [{ path: "targets.0.transform", message: expect.stringMatching(message) }],
        },
      });
    }
  });
});
