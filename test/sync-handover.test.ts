/**
 * Sync calls handed to the worker (edge RELAY_WORKER_URL, workflows/sync-calls.ts): the worker
 * starts the call's workflow and answers the edge once the call is logged and charged; calls of
 * a project arriving together share one workflow, found by any of their request ids. An edge
 * whose worker does not answer starts the call's own workflow through Temporal. The worker's
 * listener refuses everything but an edge's well-formed call.
 */
import { createServer } from "node:http";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BATCH_WORKFLOW, SYNC_BATCH_WORKFLOW } from "../core/temporal.ts";
import { freePorts } from "../dev/ports.ts";
import {
  eventually,
  extraEdge,
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";
import { batchesOf, starterOf } from "./starters.ts";

const target = await targetServer();
const [edgePort = 0, deadPort = 0] = await freePorts(2);
/** An edge whose worker URL answers nothing: every sync call goes through Temporal. */
const edgeWithoutWorker = extraEdge("edge-no-worker", edgePort, {
  RELAY_WORKER_URL: `http://127.0.0.1:${deadPort}`,
});
const temporal = await relayTemporal();

beforeAll(() => edgeWithoutWorker.start());
afterAll(async () => {
  await edgeWithoutWorker.stop();
  await temporal.connection.close();
  await target.close();
});

async function syncProject() {
  return projectWithEndpoint([{ name: "rpc", targetUrl: target.url, deliveryMode: "sync" }]);
}

test("a sync call handed to the worker: the target's answer, the request delivered, its workflow found by request id and started eagerly", async () => {
  const p = await syncProject();
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' });
  expect(answer.status).toBe(200);
  expect(answer.json()).toEqual({ ok: true });
  const requestId = String(answer.headers["x-relay-request-id"]);
  const log = await finishedLog<{ status: string; attempts: { statusCode: number }[] }>(
    p,
    requestId,
  );
  expect(log).toMatchObject({ status: "delivered", attempts: [{ statusCode: 200 }] });
  const [batch] = await eventually(async () => {
    const found = await batchesOf(requestId);
    return found.length > 0 && found;
  });
  expect(await starterOf(batch ?? "")).toEqual({
    identity: expect.stringMatching(/@relay-worker$/),
    eager: true,
  });
  // Its answer went to its edge, not through Temporal: the batch returns what became of it.
  expect(await temporal.workflow.getHandle(batch ?? "").result()).toEqual(["answered"]);
  const metrics = await (await request(`${stack().workerUrl}/metrics`)).body.text();
  expect(metrics).toMatch(/^relay_worker_sync_calls_handed_over_total\{start="eager"\} [1-9]/m);
});

test("sync calls of a project at once go in fewer workflows than calls, each answered with its own target's answer", async () => {
  const echo = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      // Slow enough that calls arriving meanwhile gather behind a start in flight.
      setTimeout(() => res.end(Buffer.concat(chunks)), 50);
    });
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(echo.address() as { port: number }).port}/echo`;
  const p = await projectWithEndpoint([{ name: "echo", targetUrl: url, deliveryMode: "sync" }]);
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"i":${i}}` }),
    ),
  );
  expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
  expect(answers.map((answer) => answer.text)).toEqual(answers.map((_, i) => `{"i":${i}}`));
  const requestIds = answers.map((answer) => String(answer.headers["x-relay-request-id"]));
  const batches = await eventually(async () => {
    const found = await Promise.all(requestIds.map((id) => batchesOf(id)));
    return found.every((ids) => ids.length === 1) && new Set(found.flat());
  });
  expect(batches.size).toBeLessThan(requestIds.length);
  echo.close();
});

test("mirror calls at once: their shadows share async batches and their live calls sync batches, each shadow delivered once", async () => {
  const shadow = await targetServer();
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: target.url, deliveryMode: "sync" },
    { name: "shadow", targetUrl: shadow.url },
  ]);
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"i":${i}}` }),
    ),
  );
  expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
  const requestIds = answers.map((answer) => String(answer.headers["x-relay-request-id"]));
  await eventually(async () => shadow.received.length >= requestIds.length);
  expect(shadow.received.map((r) => r.headers["x-relay-request-id"]).sort()).toEqual(
    [...requestIds].sort(),
  );
  for (const type of [SYNC_BATCH_WORKFLOW, BATCH_WORKFLOW]) {
    const batched = await eventually(async () => {
      const found = await Promise.all(requestIds.map((id) => batchesOf(id, type)));
      return found.some((ids) => ids.length > 0) && found;
    });
    expect(new Set(batched.flat()).size, type).toBeLessThan(requestIds.length);
  }
  await shadow.close();
});

test("an edge whose worker does not answer starts the sync call through Temporal", async () => {
  const p = await syncProject();
  const answer = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: '{"n":2}',
    edge: { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort },
  });
  expect(answer.status).toBe(200);
  const requestId = String(answer.headers["x-relay-request-id"]);
  expect((await finishedLog(p, requestId)).status).toBe("delivered");
  expect((await starterOf(requestId)).identity).not.toMatch(/@relay-worker$/);
});

describe("the worker's listener takes nothing but an edge's sync call", () => {
  const workerCall = async (
    body: string | Buffer,
    headers: Record<string, string> = { authorization: `Bearer ${stack().edgeToken}` },
    method = "POST",
  ) => {
    const response = await request(`${stack().workerUrl}/v1/sync-calls`, {
      method: method as "POST",
      headers: { "content-type": "application/json", ...headers },
      ...(method === "POST" && { body }),
    });
    return { status: response.statusCode, body: (await response.body.json()) as unknown };
  };
  const refused = (code: string) => ({ error: { code, message: expect.any(String) } });
  const call = {
    requestId: "req_handover_probe",
    project: "nobody",
    line: "v1",
    endpoint: "hook",
    ownsStatus: true,
    target: { id: "tgt_x", timeoutSeconds: 5 },
  };

  test("without the edges' token, or with another: 401, nothing started", async () => {
    expect(await workerCall(JSON.stringify(call), {})).toEqual({
      status: 401,
      body: refused("unauthenticated"),
    });
    expect(
      await workerCall(JSON.stringify(call), { authorization: `Bearer ${"x".repeat(43)}` }),
    ).toEqual({ status: 401, body: refused("unauthenticated") });
    await expect(temporal.workflow.getHandle(call.requestId).describe()).rejects.toThrow();
  });

  test("another method: 405", async () => {
    expect(await workerCall("", undefined, "GET")).toEqual({
      status: 405,
      body: refused("method_not_allowed"),
    });
  });

  test("a body that is not JSON, or not a sync call, or out of bounds: 400", async () => {
    for (const body of [
      "{",
      "[]",
      JSON.stringify({ ...call, target: { id: "tgt_x", timeoutSeconds: 3600 } }),
      JSON.stringify({ ...call, requestId: "r".repeat(201) }),
      JSON.stringify({ ...call, ownsStatus: "yes" }),
    ]) {
      expect(await workerCall(body)).toEqual({ status: 400, body: refused("bad_request") });
    }
  });

  test("a body past 2 MiB: 413", async () => {
    expect(await workerCall(Buffer.alloc(2 * 1024 * 1024 + 1, 0x20))).toEqual({
      status: 413,
      body: refused("payload_too_large"),
    });
  });
});
