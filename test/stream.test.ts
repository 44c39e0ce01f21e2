/** Stream targets: proxied chunk by chunk, aborts flow upstream, unreachable is 502. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createGzip } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import { request } from "undici";
import { afterAll, describe, expect, test } from "vitest";
import type { StreamRecord } from "../core/delivery.ts";
import { connectControlPlane } from "../edge/control.ts";
import { api, eventually, projectWithEndpoint, stack, targetServer } from "./helpers.ts";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A customer's SSE endpoint on loopback; `handle` writes the stream. */
async function sseServer(handle: Handler) {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/events`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

function streamCall(project: string, key: string, signal?: AbortSignal) {
  const { edgeUrl, edgePort } = stack();
  return request(`${edgeUrl}/v1/hook`, {
    method: "POST",
    headers: {
      host: `${project}.localhost:${edgePort}`,
      authorization: `Bearer ${key}`,
      accept: "text/event-stream",
    },
    ...(signal && { signal }),
  });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("chunks arrive as the target produces them, heartbeats included", async () => {
  let finishedAt = 0;
  const target = await sseServer(async (_, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write("data: one\n\n");
    await pause(400);
    res.write(": heartbeat\n\n");
    await pause(400);
    res.write("data: two\n\n");
    finishedAt = Date.now();
    res.end();
  });
  closers.push(target.close);
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "stream" },
  ]);

  const response = await streamCall(p.slug, p.key);
  expect(response.statusCode).toBe(200);
  expect(response.headers["content-type"]).toBe("text/event-stream");
  expect(response.headers["x-relay-request-id"]).toMatch(/^req_/);
  const arrivals: { at: number; text: string }[] = [];
  for await (const chunk of response.body)
    arrivals.push({ at: Date.now(), text: chunk.toString() });

  expect(arrivals.map((a) => a.text).join("")).toBe("data: one\n\n: heartbeat\n\ndata: two\n\n");
  // The first event reached the caller while the target was still 800 ms from done.
  const first = arrivals.find((a) => a.text.includes("data: one"));
  expect(finishedAt - (first?.at ?? finishedAt)).toBeGreaterThan(500);
  const heartbeat = arrivals.find((a) => a.text.includes("heartbeat"));
  expect(finishedAt - (heartbeat?.at ?? finishedAt)).toBeGreaterThan(200);
  expect(target.seen[0]?.headers.authorization).toBeUndefined();
  expect(target.seen[0]?.headers["accept-encoding"]).toBe("identity");
});

test("the caller hanging up aborts the call to the target", async () => {
  let targetClosedAt = 0;
  const target = await sseServer((_, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const tick = setInterval(() => res.write("data: tick\n\n"), 100);
    res.on("close", () => {
      clearInterval(tick);
      targetClosedAt = Date.now();
    });
  });
  closers.push(target.close);
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "stream" },
  ]);

  const abort = new AbortController();
  const response = await streamCall(p.slug, p.key, abort.signal);
  for await (const _ of response.body) break; // one chunk, then hang up
  const hungUpAt = Date.now();
  abort.abort();
  await eventually(async () => targetClosedAt > 0, 5000);
  expect(targetClosedAt - hungUpAt).toBeLessThan(2000);
});

test("an unreachable stream target is 502 target_unreachable", async () => {
  const p = await projectWithEndpoint([
    { name: "gone", targetUrl: "http://127.0.0.1:9/events", deliveryMode: "stream" },
  ]);
  const response = await streamCall(p.slug, p.key);
  expect(response.statusCode).toBe(502);
  expect(await response.body.json()).toMatchObject({ error: { code: "target_unreachable" } });
});

test("mixed mode: the stream answers and the async target gets the same request", async () => {
  const target = await sseServer((_, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end("data: done\n\n");
  });
  const shadow = await targetServer();
  closers.push(target.close, shadow.close);
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "stream" },
    { name: "shadow", targetUrl: shadow.url },
  ]);
  const response = await streamCall(p.slug, p.key);
  expect(await response.body.text()).toBe("data: done\n\n");
  const requestId = response.headers["x-relay-request-id"];
  await eventually(async () => shadow.received.length === 1);
  expect(shadow.received[0]?.headers["x-relay-request-id"]).toBe(requestId);
});

describe("streams in the request log and the bill", () => {
  type Log = { status: string; attempts: { statusCode: number | null; error: string | null }[] };
  const logOf = (p: { base: string; ownerToken: string }, requestId: string) =>
    eventually(async () => {
      const log = await api<Log>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
      return log.status === 200 && log.body.status !== "delivering" && log.body;
    });
  const used = async (p: { base: string; ownerToken: string }) =>
    (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
      .pools.live.used;

  /** One whole stream through a project whose only target answers with `answer`. */
  async function streamedOnce(answer: (res: ServerResponse) => void) {
    const target = await sseServer((_, res) => answer(res));
    closers.push(target.close);
    const p = await projectWithEndpoint([
      { name: "live", targetUrl: target.url, deliveryMode: "stream" },
    ]);
    const response = await streamCall(p.slug, p.key);
    await response.body.text();
    return {
      p,
      targetUrl: target.url,
      requestId: response.headers["x-relay-request-id"] as string,
    };
  }

  test("a finished stream is logged as delivered and billed by the bytes streamed back", async () => {
    const { p, requestId } = await streamedOnce((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`: ${"h".repeat(100_000)}\n\n`); // a heartbeat: free, however long
      res.end(`data: ${"x".repeat(70_000)}\n\n`);
    });
    expect(await logOf(p, requestId)).toMatchObject({
      status: "delivered",
      attempts: [{ statusCode: 200, error: null }],
    });
    await eventually(async () => (await used(p)) > 0);
    expect(await used(p)).toBe(2); // 70 008 bytes of events: two 64 KiB units
  });

  test("a target that compresses anyway: the caller gets the stream decoded as it comes, billed by its decoded bytes", async () => {
    const big = "x".repeat(70_000);
    let finishedAt = 0;
    const target = await sseServer(async (_, res) => {
      // Asked for identity, it sends gzip all the same, flushed event by event.
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" });
      const gzip = createGzip();
      gzip.pipe(res);
      const send = (text: string) =>
        new Promise<void>((resolve) => {
          gzip.write(text);
          gzip.flush(() => resolve());
        });
      await send("data: one\n\n");
      await pause(400);
      await send(`data: ${big}\n\n`);
      finishedAt = Date.now();
      gzip.end();
    });
    closers.push(target.close);
    const p = await projectWithEndpoint([
      { name: "live", targetUrl: target.url, deliveryMode: "stream" },
    ]);
    const response = await streamCall(p.slug, p.key);
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-encoding"]).toBeUndefined();
    let text = "";
    let firstAt = 0;
    for await (const chunk of response.body) {
      text += chunk.toString();
      if (!firstAt && text.includes("data: one")) firstAt = Date.now();
    }
    expect(text).toBe(`data: one\n\ndata: ${big}\n\n`);
    expect(finishedAt - firstAt).toBeGreaterThan(200);
    await eventually(async () => (await used(p)) > 0);
    expect(await used(p)).toBe(2); // 70 019 decoded bytes; gzipped they are well under 64 KiB
  });

  test("an unreachable stream target is logged as failed and not charged", async () => {
    const p = await projectWithEndpoint([
      { name: "gone", targetUrl: "http://127.0.0.1:9/e", deliveryMode: "stream" },
    ]);
    const response = await streamCall(p.slug, p.key);
    expect(response.statusCode).toBe(502);
    await response.body.dump();
    const list = await eventually(async () => {
      const page = await api<{ requests: Log[] }>(p.ownerToken, "GET", `${p.base}/requests`);
      return page.body.requests[0]?.status === "failed" && page.body.requests;
    });
    expect(list[0]?.attempts).toMatchObject([{ statusCode: null }]);
    expect(await used(p)).toBe(0);
  });

  test("a stream's record sent again by an edge (its answer lost) is logged and billed once; a malformed one is refused", async () => {
    const { p, targetUrl, requestId } = await streamedOnce((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`data: ${"x".repeat(70_000)}\n\n`);
    });
    type Attempt = { targetId: string; targetName: string; statusCode: number };
    const log = (await logOf(p, requestId)) as Log & { attempts: Attempt[] };
    await eventually(async () => (await used(p)) > 0);

    // The edge's own client, as its recorder retries a record.
    const control = connectControlPlane({
      baseUrl: stack().controlUrl,
      edgeToken: stack().edgeToken,
      fetch,
    });
    const attempt = log.attempts[0] as Attempt;
    const record: StreamRecord = {
      requestId,
      project: p.slug,
      line: "v1",
      endpoint: "hook",
      keyMode: "live",
      receivedAt: new Date().toISOString(),
      bodyBytes: 2,
      target: {
        id: attempt.targetId,
        name: attempt.targetName,
        targetUrl,
        deliveryMode: "stream",
        timeoutSeconds: 30,
        headers: {},
      },
      ownsStatus: true,
      statusCode: 200,
      latencyMs: 3,
      bytes: 70_009,
      error: null,
    };
    await control.recordStream(record);
    expect((await logOf(p, requestId)).attempts).toHaveLength(1);
    expect(await used(p)).toBe(2);

    const refused = await control
      .recordStream({ ...record, keyMode: "gold" as never })
      .catch((error: unknown) => ConnectError.from(error));
    expect(refused).toMatchObject({ code: Code.InvalidArgument });

    // An error of any length is logged, cut to 1,000 characters.
    const failedId = `${requestId}_failed`;
    await control.recordStream({
      ...record,
      requestId: failedId,
      statusCode: null,
      error: "e".repeat(5_000),
    });
    expect((await logOf(p, failedId)).attempts).toMatchObject([
      { statusCode: null, error: "e".repeat(1_000) },
    ]);
  });
});
