/**
 * Deliveries that come back through Relay's own edge: directly (a target at the edge's own
 * listener), through a customer's proxy that posts each delivery back with its headers (the
 * CDN-Loop marker counts the passes), and under a Host outside the edge's domain.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { request } from "undici";
import { afterAll, expect, test } from "vitest";
import {
  api,
  finishedLog,
  projectWithEndpoint,
  type RequestLog,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

/** Puts `targets` on the project's endpoint, each sending the project's own key. */
async function pointTargets(
  p: { base: string; ownerToken: string; key: string },
  targets: { name: string; targetUrl: string }[],
) {
  const saved = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: targets.map((t) => ({ ...t, headers: { authorization: `Bearer ${p.key}` } })),
    ipAllowlist: [],
  });
  expect(saved.status, saved.text).toBe(200);
}

/**
 * A customer's proxy on loopback: posts every request it gets to the edge as `{slug}.localhost`,
 * every header copied but the connection's own, and answers 200 once the edge answered.
 */
async function loopingProxy(slug: string) {
  const forwarded: { headers: IncomingHttpHeaders; edgeStatus: number }[] = [];
  const hopByHop = new Set(["host", "connection", "content-length", "keep-alive"]);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      const headers: Record<string, string> = { host: `${slug}.localhost:${stack().edgePort}` };
      for (const [name, value] of Object.entries(req.headers)) {
        if (!hopByHop.has(name) && typeof value === "string") headers[name] = value;
      }
      const answer = await request(`${stack().edgeUrl}/v1/hook`, {
        method: "POST",
        headers,
        body: Buffer.concat(chunks),
      });
      await answer.body.dump();
      forwarded.push({ headers: req.headers, edgeStatus: answer.statusCode });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/in`, forwarded };
}

test("a proxy that posts each delivery back to the edge loops a bounded number of times: the pass that names Relay too often is 508, never queued nor charged", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/in" }]);
  const proxy = await loopingProxy(p.slug);
  await pointTargets(p, [{ name: "proxy", targetUrl: proxy.url }]);

  const first = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: "{}",
    headers: { "cdn-loop": "customer-cdn; v=1" },
  });
  expect(first.status).toBe(202);
  // Long enough for hundreds of passes when nothing stops the loop.
  await new Promise((resolve) => setTimeout(resolve, 8_000));

  const statuses = proxy.forwarded.map((f) => f.edgeStatus);
  expect(statuses).toEqual([202, 202, 202, 508]);
  // Each delivery carries the caller's CDN-Loop, then one mark per pass through this Relay.
  const marks = proxy.forwarded.map((f) => String(f.headers["cdn-loop"]).split(",").length - 1);
  expect(marks).toEqual([1, 2, 3, 4]);
  expect(proxy.forwarded[0]?.headers["cdn-loop"]).toMatch(/^customer-cdn; v=1, \S+$/);

  const listed = await api<{ requests: unknown[] }>(p.ownerToken, "GET", `${p.base}/requests`);
  expect(listed.body.requests).toHaveLength(4);
  const usage = await api<{ pools: { live: { used: number } } }>(
    p.ownerToken,
    "GET",
    `${p.base}/usage`,
  );
  expect(usage.body.pools.live.used).toBe(4);
});

test("the 508 says why, and no key is looked at for it", async () => {
  const mark = `localhost:${stack().edgePort}`;
  const answer = await relay("no-such-project", "/v1/hook", {
    key: null,
    body: "{}",
    headers: { "cdn-loop": [mark, mark, `${mark}; x=1`, mark].join(", ") },
  });
  expect(answer.status).toBe(508);
  expect(answer.json()).toEqual({
    error: { code: "loop_detected", message: expect.any(String) },
  });
});

test("a Host outside the edge's domain gets the 401 a wrong key gets, to the byte", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
  const call = (host: string, key: string) =>
    request(`${stack().edgeUrl}/v1/hook`, {
      method: "POST",
      headers: { host, authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: "{}",
    }).then(async (answer) => ({
      status: answer.statusCode,
      headers: Object.entries(answer.headers).filter(([name]) => name !== "date"),
      body: await answer.body.text(),
    }));
  const foreign = await call(`${p.slug}.elsewhere.example`, p.key);
  const nested = await call(`${p.slug}.x.localhost:${stack().edgePort}`, p.key);
  const wrongKey = await call(`${p.slug}.localhost`, `rk_live_${"A".repeat(43)}`);
  expect(wrongKey.status).toBe(401);
  expect(foreign).toEqual(wrongKey);
  expect(nested).toEqual(wrongKey);
  expect(target.received).toHaveLength(0);
  // The same key under the edge's domain goes through.
  expect((await call(`${p.slug}.localhost:${stack().edgePort}`, p.key)).status).toBe(202);
});

test("on the dev stack's localhost, the project may lead the path; an unknown one is a wrong key", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
  const call = (path: string, key: string) =>
    request(`${stack().edgeUrl}${path}`, {
      method: "POST",
      headers: {
        host: `localhost:${stack().edgePort}`,
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
      },
      body: "{}",
    }).then(async (answer) => ({ status: answer.statusCode, body: await answer.body.text() }));
  expect((await call(`/${p.slug}/v1/hook`, p.key)).status).toBe(202);
  const unknown = await call("/nosuchproject/v1/hook", p.key);
  const wrongKey = await call(`/${p.slug}/v1/hook`, `rk_live_${"A".repeat(43)}`);
  expect(unknown).toEqual(wrongKey);
  expect(unknown.status).toBe(401);
  expect((await call(`/${p.slug}/v1/nowhere`, p.key)).status).toBe(404);
});

test("a target at the edge's own listener is refused at delivery; another loopback target delivers", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
  await pointTargets(p, [
    { name: "edge", targetUrl: `http://127.0.0.1:${stack().edgePort}/v1/hook` },
    { name: "other", targetUrl: target.url },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(202);
  const log = await finishedLog<RequestLog>(p, answer.headers["x-relay-request-id"] as string);
  const edgeAttempts = log.attempts.filter((a) => a.targetName === "edge");
  expect(edgeAttempts).toHaveLength(1);
  expect(edgeAttempts[0]?.statusCode).toBeNull();
  expect(edgeAttempts[0]?.error).toMatch(/refused: .*Relay's own edge/);
  expect(log.attempts.find((a) => a.targetName === "other")?.statusCode).toBe(200);
  expect(target.received).toHaveLength(1);
  const listed = await api<{ requests: unknown[] }>(p.ownerToken, "GET", `${p.base}/requests`);
  expect(listed.body.requests).toHaveLength(1);
});

test("a stream target at the edge's own listener is refused by the edge: 502, logged as refused", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/in" }]);
  const saved = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: [
      {
        name: "edge",
        targetUrl: `http://127.0.0.1:${stack().edgePort}/v1/hook`,
        deliveryMode: "stream",
        headers: { authorization: `Bearer ${p.key}` },
      },
    ],
    ipAllowlist: [],
  });
  expect(saved.status, saved.text).toBe(200);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(502);
  expect(answer.json().error.code).toBe("target_unreachable");
  const log = await finishedLog<RequestLog>(p, answer.headers["x-relay-request-id"] as string);
  expect(log.attempts.map((a) => a.error)).toEqual([
    `target 127.0.0.1 refused: 127.0.0.1 port ${stack().edgePort} is Relay's own edge`,
  ]);
});
