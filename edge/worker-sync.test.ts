import { propagation } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { expect, test } from "vitest";
import type { SyncInput } from "../core/delivery.ts";
import { callerTrace } from "../core/tracing.ts";
import { workerSyncCalls } from "./worker-sync.ts";

// As the edge's tracing registers it (core/telemetry.ts): W3C trace context.
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const input = { requestId: "req_1", project: "acme" } as SyncInput;
const trace = callerTrace(
  new Headers({ traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
);

/** A hand-over whose worker answers `answer` (or fails), recording what it was sent. */
function handOverAnswering(answer: () => Response | Promise<never>) {
  const sent: { url: string; init: RequestInit }[] = [];
  const logged: string[] = [];
  const handOver = workerSyncCalls({
    url: "http://worker.internal:8790",
    edgeToken: "t".repeat(32),
    fetch: async (url, init) => {
      sent.push({ url: String(url), init: init ?? {} });
      return answer();
    },
    logError: (_, message) => logged.push(message),
  });
  return { handOver, sent, logged };
}

test("the worker's outcome is the call's; the call carries the edges' token, the input and the trace", async () => {
  const outcome = { kind: "answered", status: 201, headers: {}, bodyBase64: "" };
  const { handOver, sent } = handOverAnswering(() => Response.json(outcome));
  expect(await handOver(input, new AbortController().signal, trace)).toEqual(outcome);
  const [call] = sent;
  expect(call?.url).toBe("http://worker.internal:8790/v1/sync-calls");
  // The caller's trace; its parent is the caller's span, or the hand-over's own where a file
  // before this one (one process runs them all) registered a tracer provider.
  expect(call?.init.headers).toMatchObject({
    authorization: `Bearer ${"t".repeat(32)}`,
    traceparent: expect.stringMatching(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/),
  });
  expect(JSON.parse(String(call?.init.body))).toEqual(input);
});

test("a worker that is busy, refuses or cannot be reached leaves the call to Temporal; only a busy one is not logged", async () => {
  const busy = handOverAnswering(() => Response.json({}, { status: 503 }));
  expect(await busy.handOver(input, new AbortController().signal, trace)).toBeUndefined();
  expect(busy.logged).toEqual([]);
  for (const answer of [
    () => Response.json({}, { status: 401 }),
    () => Promise.reject(new TypeError("fetch failed")),
  ]) {
    const refused = handOverAnswering(answer);
    expect(await refused.handOver(input, new AbortController().signal, trace)).toBeUndefined();
    expect(refused.logged).toHaveLength(1);
  }
});

test("a call whose time ran out at the worker is the target's timeout, not tried again", async () => {
  const { handOver } = handOverAnswering(() => Response.json({}, { status: 504 }));
  await expect(handOver(input, new AbortController().signal, trace)).rejects.toMatchObject({
    code: "target_timeout",
  });
});

test("a caller that left is not handed on to Temporal", async () => {
  const left = new AbortController();
  const { handOver } = handOverAnswering(() => {
    left.abort();
    return Promise.reject(new DOMException("aborted", "AbortError"));
  });
  await expect(handOver(input, left.signal, trace)).rejects.toMatchObject({ code: "unavailable" });
});
