/**
 * Per-target filters (Hookdeck Outpost's syntax over the call's body and headers): a target whose
 * filter does not match a call is skipped, not delivered and not charged, and the request log
 * names it with the reason; a call every target skips is answered 200 `skipped` at once, in
 * every mode. A filter is checked and bounded when it is saved.
 */
import { afterAll, describe, expect, test } from "vitest";
import { EndpointService } from "../gen/relay/v1/routing_pb.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  targetServer,
} from "./helpers.ts";

const paidOnly = await targetServer();
const everything = await targetServer();
afterAll(async () => {
  await paidOnly.close();
  await everything.close();
});

const PAID = { body: { status: { $in: ["paid", "shipped"] } } };
type Usage = { pools: { live: { used: number; held: number } } };
type Logged = {
  status: string;
  attempts: { targetName: string; statusCode: number | null }[];
  skipped: { targetName: string; reason: string }[];
};

const usage = async (p: { base: string; ownerToken: string }) =>
  (await api<Usage>(p.ownerToken, "GET", `${p.base}/usage`)).body.pools.live;
const received = (target: { received: { body: string }[] }, id: string) =>
  target.received.filter((r) => r.body.includes(id)).length;

describe("an async target whose filter does not match", () => {
  test("is skipped: not delivered, not charged, named in the log with the reason", async () => {
    const p = await projectWithEndpoint([
      { name: "paid-only", targetUrl: paidOnly.url, filter: PAID },
      { name: "everything", targetUrl: everything.url },
    ]);
    const pending = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: JSON.stringify({ id: "order-1", status: "pending" }),
    });
    expect(pending.status).toBe(202);
    const { requestId } = pending.json() as { requestId: string };
    const log = await finishedLog<Logged>(p, requestId);
    expect(log).toMatchObject({
      status: "delivered",
      attempts: [{ targetName: "everything", statusCode: 200 }],
      skipped: [{ targetName: "paid-only", reason: "filter" }],
    });
    expect(received(everything, "order-1")).toBe(1);
    expect(received(paidOnly, "order-1")).toBe(0);
    await eventually(async () => (await usage(p)).held === 0);
    expect((await usage(p)).used).toBe(1);

    const paid = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: JSON.stringify({ id: "order-2", status: "paid" }),
    });
    const paidLog = await finishedLog<Logged>(p, (paid.json() as { requestId: string }).requestId);
    expect(paidLog.skipped).toEqual([]);
    expect(paidLog.attempts.map((a) => a.targetName).sort()).toEqual(["everything", "paid-only"]);
    expect(received(paidOnly, "order-2")).toBe(1);
    await eventually(async () => (await usage(p)).held === 0);
    expect((await usage(p)).used).toBe(3);
  });

  test("a filter reads the call's headers, by lowercase name", async () => {
    const p = await projectWithEndpoint([
      { name: "from-api", targetUrl: paidOnly.url, filter: { headers: { "x-source": "api" } } },
      { name: "everything", targetUrl: everything.url },
    ]);
    const call = (id: string, source: string) =>
      relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id }),
        headers: { "X-Source": source },
      });
    const fromApi = await call("hdr-api", "api");
    const fromCron = await call("hdr-cron", "cron");
    await finishedLog(p, (fromApi.json() as { requestId: string }).requestId);
    const cronLog = await finishedLog<Logged>(
      p,
      (fromCron.json() as { requestId: string }).requestId,
    );
    expect(cronLog.skipped).toEqual([
      expect.objectContaining({ targetName: "from-api", reason: "filter" }),
    ]);
    expect(received(paidOnly, "hdr-api")).toBe(1);
    expect(received(paidOnly, "hdr-cron")).toBe(0);
  });
});

describe("a call every target skips", () => {
  test("is answered 200 skipped at once, readable in the log, and charges nothing", async () => {
    const p = await projectWithEndpoint([
      { name: "paid-only", targetUrl: paidOnly.url, filter: PAID },
    ]);
    const call = () =>
      relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id: "skip-all", status: "refunded" }),
        headers: { "idempotency-key": "refund-1" },
      });
    const skipped = await call();
    expect(skipped.status).toBe(200);
    const { requestId, status } = skipped.json() as { requestId: string; status: string };
    expect(status).toBe("skipped");
    expect(skipped.headers["x-relay-request-id"]).toBe(requestId);
    const read = await api<Logged>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
    expect(read.body).toMatchObject({
      status: "skipped",
      attempts: [],
      skipped: [{ targetName: "paid-only", reason: "filter" }],
    });
    // A repeat of its Idempotency-Key names the same request, logged once.
    expect((await call()).json()).toEqual({ status: "skipped", requestId });
    const listed = await api<{ requests: unknown[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests?status=skipped`,
    );
    expect(listed.body.requests).toHaveLength(1);
    expect(await usage(p)).toMatchObject({ used: 0, held: 0 });
    expect(received(paidOnly, "skip-all")).toBe(0);
  });

  test("a sync or a stream target skipped answers 200 skipped too, never a hang", async () => {
    for (const deliveryMode of ["sync", "stream"] as const) {
      const p = await projectWithEndpoint([
        { name: "gateway", targetUrl: paidOnly.url, deliveryMode, filter: PAID },
      ]);
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id: `skip-${deliveryMode}`, status: "pending" }),
      });
      expect(answer.status).toBe(200);
      expect(answer.json()).toMatchObject({ status: "skipped" });
      expect(received(paidOnly, `skip-${deliveryMode}`)).toBe(0);
    }
  });
});

describe("beside a target that answers the caller", () => {
  test("a sync target skipped leaves the async targets queued: 202", async () => {
    const p = await projectWithEndpoint([
      { name: "gateway", targetUrl: paidOnly.url, deliveryMode: "sync", filter: PAID },
      { name: "everything", targetUrl: everything.url },
    ]);
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: JSON.stringify({ id: "sync-skipped", status: "pending" }),
    });
    expect(answer.status).toBe(202);
    const log = await finishedLog<Logged>(p, (answer.json() as { requestId: string }).requestId);
    expect(log.skipped).toEqual([expect.objectContaining({ targetName: "gateway" })]);
    expect(received(everything, "sync-skipped")).toBe(1);
  });

  test("an async target skipped beside a sync or stream one is named in the log", async () => {
    for (const deliveryMode of ["sync", "stream"] as const) {
      const p = await projectWithEndpoint([
        { name: "gateway", targetUrl: everything.url, deliveryMode },
        { name: "paid-only", targetUrl: paidOnly.url, filter: PAID },
      ]);
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: JSON.stringify({ id: `beside-${deliveryMode}`, status: "pending" }),
      });
      expect(answer.status).toBe(200);
      expect(answer.json()).toEqual({ ok: true }); // the target's own answer
      const requestId = answer.headers["x-relay-request-id"] as string;
      const log = await finishedLog<Logged>(p, requestId);
      expect(log).toMatchObject({
        status: "delivered",
        skipped: [{ targetName: "paid-only", reason: "filter" }],
      });
      expect(received(paidOnly, `beside-${deliveryMode}`)).toBe(0);
    }
  });
});

test("Send again matches the filters as they are: an edited body a filter drops skips it", async () => {
  const p = await projectWithEndpoint([
    { name: "paid-only", targetUrl: paidOnly.url, filter: PAID },
    { name: "everything", targetUrl: everything.url },
  ]);
  const paid = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: JSON.stringify({ id: "resend-1", status: "paid" }),
  });
  const { requestId } = paid.json() as { requestId: string };
  await finishedLog(p, requestId);
  const edited = JSON.stringify({ id: "resend-2", status: "pending" });
  const resent = await api<Logged & { requestId: string }>(
    p.ownerToken,
    "POST",
    `${p.base}/requests/${requestId}/send-again`,
    { body: { encoding: "utf8", text: edited } },
  );
  expect(resent.status).toBe(202);
  const log = await finishedLog<Logged>(p, resent.body.requestId);
  expect(log.skipped).toEqual([expect.objectContaining({ targetName: "paid-only" })]);
  expect(received(everything, "resend-2")).toBe(1);
  expect(received(paidOnly, "resend-2")).toBe(0);
});

describe("saving a filter", () => {
  const endpointWith = async (filter: unknown) => {
    const p = await projectWithEndpoint([{ name: "t", targetUrl: everything.url }]);
    return api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
      targets: [{ name: "t", targetUrl: everything.url, filter }],
    });
  };

  test("a filter that is not one is 400 with where it went wrong", async () => {
    const deep = JSON.parse(`${'{"a":'.repeat(40)}1${"}".repeat(40)}`);
    for (const [filter, where] of [
      [{ body: { amount: { $between: [1, 2] } } }, "$between"],
      [{ $or: { body: {} } }, "$or"],
      [{ headers: { "X-Source": "api" } }, "X-Source"],
      [{ payload: { a: 1 } }, "payload"],
      [{ body: deep }, "deep"],
      ["status=paid", "object"],
    ] as const) {
      const answer = await endpointWith(filter);
      expect(answer.status, JSON.stringify(filter).slice(0, 80)).toBe(400);
      const { error } = answer.body as {
        error: { code: string; details: { path: string; message: string }[] };
      };
      expect(error.code).toBe("bad_request");
      expect(error.details[0]?.path).toBe("targets.0.filter");
      expect(JSON.stringify(error.details)).toContain(where);
    }
  });

  test("a filter is kept as written, nulls included, and read back over REST and Connect", async () => {
    const filter = { body: { deleted_at: { $eq: null }, tags: "urgent" } };
    const saved = await endpointWith(filter);
    expect(saved.status).toBe(200);
    const [target] = (saved.body as { targets: { filter?: unknown }[] }).targets;
    expect(target?.filter).toEqual(filter);
    const cleared = await endpointWith({});
    expect(
      (cleared.body as { targets: { filter?: unknown }[] }).targets[0]?.filter,
    ).toBeUndefined();

    const p = await projectWithEndpoint([{ name: "t", targetUrl: everything.url, filter }]);
    const { endpoint } = await memberClient(EndpointService, p.ownerToken).getEndpoint({
      project: p.slug,
      line: "v1",
      path: "hook",
    });
    expect(endpoint?.targets[0]?.filter).toEqual(filter);
  });
});
