/**
 * Sync calls handed to the worker (edge RELAY_WORKER_URL, workflows/sync-calls.ts): the worker
 * starts the call's workflow and answers the edge once the call is logged and charged; the
 * workflow is the one the edge would start, found by request id. An edge whose worker does not
 * answer starts the workflow through Temporal as before. The worker's listener refuses
 * everything but an edge's well-formed call.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import {
  extraEdge,
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";
import { starterOf } from "./starters.ts";

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
  expect(await starterOf(requestId)).toEqual({
    identity: expect.stringMatching(/@relay-worker$/),
    eager: true,
  });
  const handle = temporal.workflow.getHandle(requestId);
  expect(await handle.result()).toMatchObject({ kind: "answered", status: 200 });
  const metrics = await (await request(`${stack().workerUrl}/metrics`)).body.text();
  expect(metrics).toMatch(/^relay_worker_sync_calls_handed_over_total\{start="eager"\} [1-9]/m);
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
