/**
 * The same edge handler under Deno (the `deno` npm package's binary), against the same control
 * plane and Temporal: async, sync and stream, and a caller's abort reaching the target.
 */
import { createServer } from "node:http";
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import {
  denoEdgeProcess,
  edgeEnv,
  eventually,
  projectWithEndpoint,
  relay,
  stack,
  stackLog,
  targetServer,
} from "./helpers.ts";
import { starterOf, syncBatchOf } from "./starters.ts";

const [port = 0] = await freePorts(1);
const denoEdge = { edgeUrl: `http://127.0.0.1:${port}`, edgePort: port };
const deno = denoEdgeProcess(
  edgeEnv(port, { RELAY_ALLOW_PRIVATE_TARGETS: "1", RELAY_WORKER_URL: stack().workerUrl }),
  stackLog(),
);
const sink = await targetServer();
let streamClosedAt = 0;
const streaming = createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write("data: first\n\n");
  const tick = setInterval(() => res.write("data: tick\n\n"), 100);
  res.on("close", () => {
    clearInterval(tick);
    streamClosedAt = Date.now();
  });
});
const answering = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200, { "x-from": "sync-target" }).end("sync answer"));
});

beforeAll(async () => {
  await Promise.all(
    [streaming, answering].map(
      (s) => new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve)),
    ),
  );
  await deno.start();
}, 120_000);
afterAll(async () => {
  await deno.stop();
  await sink.close();
  streaming.close();
  answering.close();
});

const urlOf = (server: typeof streaming) =>
  `http://127.0.0.1:${(server.address() as { port: number }).port}/x`;

test("async under Deno: 202 queued, delivered by the worker", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const answer = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: '{"on":"deno"}',
    edge: denoEdge,
  });
  expect(answer.status).toBe(202);
  const { requestId } = answer.json();
  const delivery = await eventually(async () =>
    sink.received.find((r) => r.headers["x-relay-request-id"] === requestId),
  );
  expect(delivery.body).toBe('{"on":"deno"}');
  expect(delivery.headers.authorization).toBeUndefined();
});

test("a target's filter under Deno: a call it does not match skips it, one every target skips is 200 skipped", async () => {
  const paid = { body: { status: "paid" } };
  const p = await projectWithEndpoint([
    { name: "paid-only", targetUrl: sink.url, filter: paid },
    { name: "also-paid", targetUrl: sink.url, filter: paid },
  ]);
  const call = (status: string) =>
    relay(p.slug, "/v1/hook", { key: p.key, body: JSON.stringify({ status }), edge: denoEdge });
  const pending = await call("pending");
  expect(pending.status).toBe(200);
  expect(pending.json()).toMatchObject({ status: "skipped" });
  const matched = await call("paid");
  expect(matched.status).toBe(202);
  const { requestId } = matched.json();
  await eventually(
    async () =>
      sink.received.filter((r) => r.headers["x-relay-request-id"] === requestId).length === 2,
  );
});

test("a stream target's transformation under Deno: run in a Web Worker's sandbox, a drop answered 200 skipped", async () => {
  const p = await projectWithEndpoint([
    {
      name: "shaped",
      targetUrl: sink.url,
      deliveryMode: "stream",
      transform: `(r) => r.body.drop ? null : { ...r, path: "/shaped", body: { on: r.body.on } }`,
    },
  ]);
  const call = (body: object) =>
    relay(p.slug, "/v1/hook", { key: p.key, body: JSON.stringify(body), edge: denoEdge });
  const shaped = await call({ on: "deno-transform", extra: 1 });
  expect(shaped.status).toBe(200);
  const requestId = String(shaped.headers["x-relay-request-id"]);
  const got = sink.received.find((r) => r.headers["x-relay-request-id"] === requestId);
  expect(got).toMatchObject({ path: "/shaped", body: '{"on":"deno-transform"}' });
  const dropped = await call({ drop: true });
  expect(dropped.status).toBe(200);
  expect(dropped.json()).toMatchObject({ status: "skipped" });
});

test("sync under Deno: the target's own answer, the call handed to the worker", async () => {
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: urlOf(answering), deliveryMode: "sync" },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: denoEdge });
  expect(answer.status).toBe(200);
  expect(answer.text).toBe("sync answer");
  expect(answer.headers["x-from"]).toBe("sync-target");
  const starter = await starterOf(await syncBatchOf(String(answer.headers["x-relay-request-id"])));
  expect(starter.identity).toMatch(/@relay-worker$/);
});

test("stream under Deno: chunks arrive as produced; hanging up aborts the target", async () => {
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: urlOf(streaming), deliveryMode: "stream" },
  ]);
  const abort = new AbortController();
  const response = await request(`${denoEdge.edgeUrl}/v1/hook`, {
    method: "POST",
    headers: { host: `${p.slug}.localhost`, authorization: `Bearer ${p.key}` },
    signal: abort.signal,
  });
  expect(response.statusCode).toBe(200);
  const chunks: string[] = [];
  for await (const chunk of response.body) {
    chunks.push(chunk.toString());
    if (chunks.join("").includes("tick")) break; // the target never finishes: pieces arrived
  }
  expect(chunks.join("")).toMatch(/^data: first\n\n/);
  const hungUpAt = Date.now();
  abort.abort();
  await eventually(async () => streamClosedAt > 0, 5000);
  expect(streamClosedAt - hungUpAt).toBeLessThan(2000);
});

test("a stream its target cuts is cut for the caller under Deno too", async () => {
  const cutting = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("data: one\n\n", () => setTimeout(() => res.socket?.destroy(), 100));
  });
  await new Promise<void>((resolve) => cutting.listen(0, "127.0.0.1", resolve));
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: urlOf(cutting), deliveryMode: "stream" },
  ]);
  const response = await request(`${denoEdge.edgeUrl}/v1/hook`, {
    method: "POST",
    headers: { host: `${p.slug}.localhost`, authorization: `Bearer ${p.key}` },
  });
  expect(response.statusCode).toBe(200);
  const received: string[] = [];
  const read = (async () => {
    for await (const chunk of response.body) received.push(chunk.toString());
  })();
  await expect(read).rejects.toThrow();
  expect(received.join("")).toBe("data: one\n\n");
  cutting.close();
});

test("refusals under Deno are the same bytes as under Node", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const node = await relay(p.slug, "/v1/hook", { key: "wrong" });
  const onDeno = await relay(p.slug, "/v1/hook", { key: "wrong", edge: denoEdge });
  expect(onDeno.status).toBe(401);
  expect(onDeno.text).toBe(node.text);
});

test("every pipeline refusal under Deno matches Node's, status and body", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }], {
    schema: { type: "object", required: ["id"] },
    rateLimit: { requestsPerSecond: 0.01, burst: 1 },
  });
  const closed = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }], {
    ipAllowlist: ["10.0.0.0/8"],
  });
  const calls: [string, Parameters<typeof relay>][] = [
    ["405", [p.slug, "/v1/hook", { key: p.key, method: "GET" }]],
    ["401", [p.slug, "/v1/hook", { key: "nope", body: "{}" }]],
    ["404", [p.slug, "/v1/none", { key: p.key, body: "{}" }]],
    ["403", [closed.slug, "/v1/hook", { key: closed.key, body: "{}" }]],
    [
      "413",
      [
        p.slug,
        "/v1/hook",
        { key: p.key, body: JSON.stringify({ id: "x".repeat(6 * 1024 * 1024) }) },
      ],
    ],
    [
      "415",
      [p.slug, "/v1/hook", { key: p.key, body: "id=1", headers: { "content-type": "text/plain" } }],
    ],
    ["422", [p.slug, "/v1/hook", { key: p.key, body: "{}" }]],
  ];
  for (const [status, [project, path, options]] of calls) {
    const onNode = await relay(project, path, options);
    const onDeno = await relay(project, path, { ...options, edge: denoEdge });
    expect(onDeno.status, status).toBe(Number(status));
    expect(onDeno.text, status).toBe(onNode.text);
  }
  // Each edge has its own bucket (burst 1): the first valid call passes, the second is 429.
  expect(
    (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"id":1}', edge: denoEdge })).status,
  ).toBe(202);
  const limited = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"id":1}', edge: denoEdge });
  expect(limited.status).toBe(429);
  expect(limited.headers["retry-after"]).toBeDefined();
});
