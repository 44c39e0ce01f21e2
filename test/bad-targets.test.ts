/**
 * Targets that misbehave: one answering 50 MB, one that never answers. Each is bounded by its
 * timeout or a size cap, logged, and leaves every process serving.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type RequestLog,
  relay,
  type TargetSpec,
} from "./helpers.ts";

const FIFTY_MB = 50 * 1024 * 1024;
const servers: ReturnType<typeof createServer>[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => handle(req, res));
    res.on("error", () => {});
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/in`;
}

/** 50 MB of JSON, written as fast as the reader takes it. */
const flood = await serve((_, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": String(FIFTY_MB) });
  const chunk = Buffer.alloc(1024 * 1024, 0x20);
  let sent = 0;
  const write = () => {
    while (sent < FIFTY_MB) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", write);
    }
    res.end();
  };
  write();
});
/** Reads the request and never answers. */
const silent = await serve(() => {});
const healthy = await serve((_, res) => res.end("{}"));

async function call(targets: TargetSpec[]) {
  const p = await projectWithEndpoint(targets);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  return { p, answer };
}

test("an async target answering 50 MB is delivered on its status; the body is never read", async () => {
  const { p, answer } = await call([{ name: "flood", targetUrl: flood }]);
  expect(answer.status).toBe(202);
  const log = await finishedLog(p, answer.json().requestId);
  expect(log.status).toBe("delivered");
  expect(log.attempts.map((a) => a.statusCode)).toEqual([200]);
});

test("a sync target answering 50 MB is cut at 1 MiB: 502, logged", async () => {
  const { p, answer } = await call([{ name: "flood", targetUrl: flood, deliveryMode: "sync" }]);
  expect(answer.status).toBe(502);
  expect(answer.json().error.message).toBe("the sync target's answer was over 1 MiB");
  const log = await finishedLog(p, answer.headers["x-relay-request-id"] as string);
  expect(log.attempts).toHaveLength(1);
});

test("a stream target that never starts answering is cut at its timeout: 504, logged", async () => {
  const { p, answer } = await call([
    { name: "silent", targetUrl: silent, deliveryMode: "stream", timeoutSeconds: 1 },
  ]);
  expect(answer.status).toBe(504);
  expect(answer.json().error.code).toBe("target_timeout");
  const log = await finishedLog(p, answer.headers["x-relay-request-id"] as string);
  expect(log.status).toBe("failed");
  expect(log.attempts[0]?.error).toBe("the stream target did not answer in time");
});

test("an async target that never answers times out per attempt and is retried", async () => {
  const { p, answer } = await call([
    { name: "silent", targetUrl: silent, timeoutSeconds: 1 },
    { name: "healthy", targetUrl: healthy },
  ]);
  expect(answer.status).toBe(202);
  const log = await logOnceRetried(p, answer.json().requestId);
  expect(
    (log.attempts ?? []).filter((a) => a.targetName === "silent").length,
  ).toBeGreaterThanOrEqual(2);
  expect(log.attempts.find((a) => a.targetName === "healthy")?.statusCode).toBe(200);
});

/** The log once the silent target has had two attempts, both timed out. */
async function logOnceRetried(p: { base: string; ownerToken: string }, id: string) {
  return eventually(async () => {
    const log = (await api<RequestLog>(p.ownerToken, "GET", `${p.base}/requests/${id}`)).body;
    const timedOut = (log.attempts ?? []).filter(
      (a) => a.targetName === "silent" && a.error?.startsWith("TimeoutError"),
    );
    return timedOut.length >= 2 && log;
  }, 20_000);
}
