/**
 * What leaves Relay for a target: no redirect followed, the body's exact bytes, every target of
 * the largest endpoint reached, configured headers that callers cannot dilute, and a stream cut
 * by its target cut for the caller too.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import { request } from "undici";
import { afterAll, describe, expect, test } from "vitest";
import type { DeliveryInput } from "../core/delivery.ts";
import { DELIVERY_WORKFLOW, TASK_QUEUE } from "../core/temporal.ts";
import {
  api,
  eventually,
  finishedLog,
  grantCredits,
  projectWithEndpoint,
  type RequestLog,
  relay,
  relayTemporal,
  stack,
} from "./helpers.ts";

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A loopback target that keeps every request's exact bytes; `answer` writes the response. */
async function rawTarget(
  answer: (res: ServerResponse, seen: Seen) => void = (res) => res.end('{"ok":true}'),
) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const entry = { path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) };
      seen.push(entry);
      answer(res, entry);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { url: `${origin}/in`, origin, seen };
}

/** An inbound call with a body of raw bytes. */
async function relayBytes(
  p: { slug: string; key: string },
  body: Uint8Array,
  headers: Record<string, string> = {},
) {
  const { edgeUrl, edgePort } = stack();
  const response = await request(`${edgeUrl}/v1/hook`, {
    method: "POST",
    headers: {
      host: `${p.slug}.localhost:${edgePort}`,
      authorization: `Bearer ${p.key}`,
      "content-type": "application/octet-stream",
      ...headers,
    },
    body,
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    body: Buffer.from(await response.body.arrayBuffer()),
  };
}

describe("a target's redirect is its answer, never followed", async () => {
  const internal = await rawTarget((res) => res.end("internal secret"));
  const redirecting = await rawTarget((res) => {
    res.writeHead(307, { location: `${internal.origin}/secret`, "content-type": "text/plain" });
    res.end("moved");
  });

  test("sync: the caller gets the 307 itself, the address it names gets nothing", async () => {
    const p = await projectWithEndpoint([
      { name: "live", targetUrl: redirecting.url, deliveryMode: "sync" },
    ]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(answer.text).not.toContain("internal secret");
    expect(answer.status).toBe(307);
    expect(answer.text).toBe("moved");
    expect(internal.seen).toHaveLength(0);
  });

  test("stream: the same", async () => {
    const p = await projectWithEndpoint([
      { name: "live", targetUrl: redirecting.url, deliveryMode: "stream" },
    ]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(answer.text).not.toContain("internal secret");
    expect(answer.status).toBe(307);
    expect(internal.seen).toHaveLength(0);
  });

  test("async: the attempt is logged as the 307 it was, failed, and not retried", async () => {
    const p = await projectWithEndpoint([{ name: "hook", targetUrl: redirecting.url }]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(answer.status).toBe(202);
    const log = await finishedLog<RequestLog>(p, answer.json().requestId);
    expect(log.status).toBe("failed");
    expect(log.attempts).toMatchObject([{ statusCode: 307 }]);
    expect(internal.seen).toHaveLength(0);
  });
});

describe("bodies arrive byte for byte and are billed by their real size", () => {
  const binary = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a]);

  test("async and sync deliver a non-UTF-8 body unchanged", async () => {
    const target = await rawTarget((res, seen) => res.end(seen.body));
    const p = await projectWithEndpoint([
      { name: "live", targetUrl: target.url, deliveryMode: "sync" },
      { name: "mirror", targetUrl: target.url },
    ]);
    const answer = await relayBytes(p, binary);
    expect(answer.status).toBe(200);
    expect([...answer.body]).toEqual([...binary]);
    await eventually(async () => target.seen.length === 2);
    for (const seen of target.seen) expect([...seen.body]).toEqual([...binary]);
  });

  test("64 KiB of bytes that are not UTF-8 cost one credit, not the three of their re-encoding", async () => {
    const target = await rawTarget();
    const p = await projectWithEndpoint([{ name: "hook", targetUrl: target.url }]);
    const answer = await relayBytes(p, new Uint8Array(64 * 1024).fill(0xff));
    expect(answer.status).toBe(202);
    const requestId = JSON.parse(answer.body.toString()).requestId as string;
    await finishedLog(p, requestId);
    expect(target.seen[0]?.body.byteLength).toBe(64 * 1024);
    const usage = await api<{ pools: { live: { used: number } } }>(
      p.ownerToken,
      "GET",
      `${p.base}/usage`,
    );
    expect(usage.body.pools.live.used).toBe(1);
  });

  test("a delivery queued before bodies travelled in base64 still delivers its text", async () => {
    const target = await rawTarget();
    const p = await projectWithEndpoint([{ name: "hook", targetUrl: target.url }]);
    const endpoint = await api<{ targets: { id: string }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/lines/v1/endpoints/hook`,
    );
    const client = await relayTemporal();
    const requestId = `req_legacy${Date.now()}`;
    // The input as edges before base64 queued it: the body as text, no bodyBase64.
    const legacy = {
      requestId,
      project: p.slug,
      line: "v1",
      endpoint: "hook",
      keyMode: "live",
      receivedAt: new Date().toISOString(),
      headers: { "content-type": "application/json" },
      body: '{"queued":"before"}',
      bodyBytes: 19,
      targets: [
        {
          id: endpoint.body.targets[0]?.id ?? "",
          name: "hook",
          targetUrl: target.url,
          deliveryMode: "async",
          timeoutSeconds: 5,
          headers: {},
        },
      ],
    } as Omit<DeliveryInput, "bodyBase64">;
    await client.workflow.start(DELIVERY_WORKFLOW, {
      taskQueue: TASK_QUEUE,
      workflowId: requestId,
      args: [legacy],
    });
    await client.connection.close();
    await eventually(async () => target.seen.length === 1);
    expect(target.seen[0]?.body.toString()).toBe('{"queued":"before"}');
  });
});

test("an endpoint with the most targets allowed gets a 256 KiB body to every one", async () => {
  const target = await rawTarget();
  const targets = Array.from({ length: 50 }, (_, i) => ({
    name: `t${i}`,
    targetUrl: `${target.url}?t=${i}`,
  }));
  const p = await projectWithEndpoint(targets);
  // 50 deliveries of 256 KiB each hold more than the 100 credits a project starts with.
  await grantCredits(p.slug, 10_000);
  const body = new Uint8Array(256 * 1024).fill(0x61);
  const answer = await relayBytes(p, body);
  expect(answer.status).toBe(202);
  const requestId = JSON.parse(answer.body.toString()).requestId as string;
  const log = await finishedLog<RequestLog>(p, requestId, 45_000);
  expect(log.status).toBe("delivered");
  expect(log.attempts).toHaveLength(50);
  expect(new Set(target.seen.map((seen) => seen.path)).size).toBe(50);
  expect(target.seen.every((seen) => seen.body.equals(body))).toBe(true);
});

describe("a target's configured header wins over the caller's, whatever the case", () => {
  for (const deliveryMode of ["async", "sync", "stream"] as const) {
    test(deliveryMode, async () => {
      const target = await rawTarget();
      const p = await projectWithEndpoint([
        { name: "t", targetUrl: target.url, deliveryMode, headers: { "X-Api-Key": "configured" } },
      ]);
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: "{}",
        headers: { "x-api-key": "from-the-caller" },
      });
      expect(answer.status).toBeLessThan(300);
      await eventually(async () => target.seen.length === 1);
      expect(target.seen[0]?.headers["x-api-key"]).toBe("configured");
    });
  }
});

test("a stream its target cuts is cut for the caller, not ended as if it were whole", async () => {
  const target = await rawTarget((res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("data: one\n\n", () => setTimeout(() => res.socket?.destroy(), 100));
  });
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "stream" },
  ]);
  const { edgeUrl, edgePort } = stack();
  const response = await request(`${edgeUrl}/v1/hook`, {
    method: "POST",
    headers: { host: `${p.slug}.localhost:${edgePort}`, authorization: `Bearer ${p.key}` },
  });
  expect(response.statusCode).toBe(200);
  const received: string[] = [];
  const read = (async () => {
    for await (const chunk of response.body) received.push(chunk.toString());
  })();
  await expect(read).rejects.toThrow();
  expect(received.join("")).toBe("data: one\n\n");
});
