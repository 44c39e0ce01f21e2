/** Sync targets: through Temporal and a worker, never retried, the target's own answer. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { afterAll, expect, test } from "vitest";
import { api, eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

async function syncTarget(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  let calls = 0;
  const server = createServer((req, res) => {
    calls++;
    req.resume();
    req.on("end", () => handle(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/rpc`,
    calls: () => calls,
  };
}

test("the caller gets the sync target's own status, headers and body; the log shows one attempt", async () => {
  const target = await syncTarget((_, res) => {
    res.writeHead(201, {
      "content-type": "application/json",
      "x-order": "A-7",
      connection: "close",
    });
    res.end(JSON.stringify({ created: true, note: "ünïcode" }));
  });
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "sync", timeoutSeconds: 5 },
  ]);

  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"order":7}' });
  expect(answer.status).toBe(201);
  expect(answer.json()).toEqual({ created: true, note: "ünïcode" });
  expect(answer.headers["x-order"]).toBe("A-7");
  const requestId = answer.headers["x-relay-request-id"] as string;
  expect(requestId).toMatch(/^req_/);

  const log = await eventually(async () => {
    const found = await api<{ status: string; attempts: { statusCode: number }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests/${requestId}`,
    );
    return found.status === 200 && found.body.status === "delivered" && found.body;
  });
  expect(log.attempts).toMatchObject([{ statusCode: 201 }]);
});

test("a sync target's 503 is returned as it is and never retried", async () => {
  const target = await syncTarget((_, res) => {
    res.writeHead(503, { "content-type": "text/plain", "retry-after": "1" });
    res.end("busy");
  });
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "sync" },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(503);
  expect(answer.text).toBe("busy");
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(target.calls()).toBe(1);
});

test("past timeoutSeconds the caller gets 504 target_timeout", async () => {
  const target = await syncTarget((_, res) => {
    setTimeout(() => res.end("late"), 4000);
  });
  const p = await projectWithEndpoint([
    { name: "slow", targetUrl: target.url, deliveryMode: "sync", timeoutSeconds: 1 },
  ]);
  const started = Date.now();
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(504);
  expect(answer.json().error.code).toBe("target_timeout");
  expect(Date.now() - started).toBeLessThan(3500);
});

test("an unreachable sync target is 502 target_unreachable", async () => {
  const p = await projectWithEndpoint([
    { name: "gone", targetUrl: "http://127.0.0.1:9/rpc", deliveryMode: "sync" },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(502);
  expect(answer.json().error.code).toBe("target_unreachable");
});

test("mirror: a shadow target beside a live sync target gets every request", async () => {
  const live = await syncTarget((_, res) => res.end("live answer"));
  const shadow = await targetServer();
  closers.push(shadow.close);
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: live.url, deliveryMode: "sync" },
    { name: "shadow", targetUrl: shadow.url },
  ]);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}` });
    expect(answer.text).toBe("live answer");
    ids.push(answer.headers["x-relay-request-id"] as string);
  }
  await eventually(async () => shadow.received.length === 3);
  expect(shadow.received.map((r) => r.headers["x-relay-request-id"]).sort()).toEqual(ids.sort());
  expect(shadow.received.map((r) => r.body).sort()).toEqual(['{"n":0}', '{"n":1}', '{"n":2}']);
});
