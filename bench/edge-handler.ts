/**
 * The edge's handler alone, in this process (part of `npm run bench:stream-trace`): a stream call
 * through every step to a target that answers one chunk at once, with no socket on either side,
 * from the call to the answer's first chunk. Beside it, the web-standard shape with no steps (the
 * body read, the target called, its answer a `Response` over a `ReadableStream`). Each runs back
 * to back and with the process idle between calls, as a caller's lone stream finds it.
 */

import { setTimeout as sleep } from "node:timers/promises";
import { unkeyedDigest } from "../core/id-digest.ts";
import type { DeliveryTarget } from "../core/model.ts";
import { createEdge, type EdgeHandler } from "../edge/app.ts";
import type { EdgeDeps } from "../edge/deps.ts";
import type { InboundRequest } from "../edge/pipeline.ts";
import { endpointIn, hookEndpoint, liveKey, projectState } from "../edge/steps/testing.ts";
import { hmacSha256, sha256 } from "../platform/node-crypto.ts";
import { percentile } from "./harness.ts";

export const KEY = `rk_live_${"r".repeat(43)}`;
const CHUNK = new TextEncoder().encode("data: 1\n\n");

/** The target: 200 and one SSE event, at once. */
const callTarget: EdgeDeps["callTarget"] = async () => ({
  status: 200,
  headers: new Headers({ "content-type": "text/event-stream" }),
  body: oneChunk(CHUNK),
});

export async function* oneChunk(chunk: Uint8Array): AsyncGenerator<Uint8Array> {
  yield chunk;
}

/** A stream target that answers at once (`callTarget`). */
const streamTarget: DeliveryTarget = {
  id: "t",
  name: "t",
  targetUrl: "http://127.0.0.1:9/stream",
  deliveryMode: "stream",
  timeoutSeconds: 30,
  headers: {},
};

/**
 * The edge's whole handler in this process for the endpoint `v1/hook` of project `acme` (key
 * `KEY`): no control plane, Temporal or socket; async calls are queued at once.
 */
export function inProcessEdge(targets: DeliveryTarget[] = [streamTarget]): EdgeHandler {
  const endpoint = hookEndpoint({
    targets,
    rateLimit: { requestsPerSecond: 1_000_000, burst: 1_000_000 },
  });
  let ids = 0;
  return createEdge({
    edgeDomain: "localhost:8787",
    state: {
      now: () => new Date(),
      key: async () => liveKey,
      endpoint: endpointIn(
        projectState(endpoint, { projectRateLimit: endpoint.rateLimit ?? undefined }),
      ),
    },
    hashKey: sha256,
    hmac: hmacSha256,
    temporal: {
      ready: async () => {},
      startDelivery: async () => "queued",
      claimSync: () => null,
      runSync: () => Promise.reject(new Error("no sync target here")),
    },
    callTarget,
    transform: () => Promise.reject(new Error("no transformations in this bench")),
    logError: () => {},
    storeBody: () => Promise.reject(new Error("no large body here")),
    claimIdempotencyKey: async () => "claimed" as const,
    joinLane: async () => true,
    leaveLane: async () => {},
    reserveDeliveries: async () => null,
    releaseDeliveries: async () => {},
    recordStream: () => {},
    recordSkipped: async () => {},
    newRequestId: () => `req_${ids++}`,
    idDigest: unkeyedDigest,
    maxBodyBytes: 1024 * 1024,
  });
}

/** No steps: the body read, the target called, its answer passed on as a web `Response`. */
const webStandardShape: EdgeHandler = async (request) => {
  for await (const _ of request.body ?? []);
  const answer = await callTarget("http://127.0.0.1:9/stream", {
    method: "POST",
    headers: new Headers(),
    body: new Uint8Array(),
    redirect: "manual",
    signal: request.signal,
  });
  const chunks = answer.body?.[Symbol.asyncIterator]();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await chunks?.next();
      if (!next || next.done) controller.close();
      else controller.enqueue(next.value);
    },
  });
  return new Response(body, { status: answer.status, headers: answer.headers });
};

/** One call as the Node adapter hands it on; ms to the answer's first chunk. */
async function callOnce(handler: EdgeHandler): Promise<number> {
  const started = performance.now();
  const headers = new Headers([
    ["host", "acme.localhost:8787"],
    ["authorization", `Bearer ${KEY}`],
    ["content-type", "application/json"],
    ["content-length", "2"],
  ]);
  const request: InboundRequest = {
    method: "POST",
    url: "http://edge.invalid/v1/hook",
    headers,
    signal: new AbortController().signal,
    body: oneChunk(new TextEncoder().encode("{}")),
  };
  const answer = await handler(request, { remoteAddress: "127.0.0.1" });
  if (answer.status !== 200 || !answer.body) throw new Error(`answered ${answer.status}`);
  const reader = answer.body.getReader();
  await reader.read();
  const ms = performance.now() - started;
  while (!(await reader.read()).done);
  return ms;
}

/** p50 µs to the first chunk, through the edge and through the shape with no steps, per idle gap. */
export async function handlerCost(calls: number, gapsMs: number[]) {
  const [edge, bare] = [inProcessEdge(), webStandardShape];
  for (const handler of [edge, bare]) for (let i = 0; i < 2000; i++) await callOnce(handler);
  const p50Us = async (handler: EdgeHandler, gapMs: number) => {
    const times: number[] = [];
    for (let i = 0; i < calls; i++) {
      await (gapMs > 0 ? sleep(gapMs) : new Promise((resolve) => setImmediate(resolve)));
      times.push(await callOnce(handler));
    }
    return percentile(times, 0.5) * 1000;
  };
  const rows: { gapMs: number; edgeUs: number; noStepsUs: number }[] = [];
  for (const gapMs of gapsMs) {
    rows.push({ gapMs, edgeUs: await p50Us(edge, gapMs), noStepsUs: await p50Us(bare, gapMs) });
  }
  return rows;
}
