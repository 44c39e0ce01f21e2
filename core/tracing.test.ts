import { SpanStatusCode } from "@opentelemetry/api";
import { afterEach, expect, test } from "vitest";
import type { DeliveryTarget } from "./model.ts";
import { recordSpans } from "./recorded-spans.ts";
import { sendToTarget, type TargetCallInput } from "./target-call.ts";
import { type CallTarget, type TargetInit, TargetRefused } from "./target-request.ts";
import { callerTrace, traceIdOf, untraced } from "./tracing.ts";

const exported = recordSpans();
afterEach(() => exported.reset());

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const caller = new Headers({ traceparent: `00-${TRACE}-00f067aa0ba902b7-01` });
const target: DeliveryTarget = {
  id: "tgt_1",
  name: "orders",
  targetUrl: "http://orders.example/in",
  deliveryMode: "async",
  timeoutSeconds: 5,
  headers: {},
};

function call(answer: (init: TargetInit) => Promise<number>) {
  const sent: TargetInit[] = [];
  const callTarget: CallTarget = async (_url, init) => {
    sent.push(init);
    return { status: await answer(init), headers: new Headers(), body: null };
  };
  const input: TargetCallInput = {
    requestId: "req_1",
    target,
    attempt: 3,
    callerHeaders: { traceparent: caller.get("traceparent") ?? "" },
    project: "acme",
    transform: () => Promise.reject(new Error("this target has no transformation")),
    body: new Uint8Array(),
    signingKeys: [],
    signedAt: new Date(0),
    signal: new AbortController().signal,
    timeoutBounds: "answer",
    trace: callerTrace(caller),
  };
  return { sent, done: sendToTarget(callTarget, input) };
}

test("an attempt's span is the target's parent, in the caller's trace, replacing its traceparent", async () => {
  const { sent, done } = call(async () => 200);
  await done;
  const [span] = exported.getFinishedSpans();
  expect(span?.name).toBe("POST orders");
  expect(span?.parentSpanId).toBe("00f067aa0ba902b7");
  expect(span?.attributes).toEqual({
    "relay.request_id": "req_1",
    "relay.target": "orders",
    "relay.attempt": 3,
    "http.response.status_code": 200,
  });
  expect(sent[0]?.headers.get("traceparent")).toBe(`00-${TRACE}-${span?.spanContext().spanId}-01`);
});

test("a 5xx ends the attempt's span as an error; no answer says why", async () => {
  await call(async () => 503).done;
  await call(() => Promise.reject(new TargetRefused("10.0.0.7 is a private address"))).done;
  const [answered, refused] = exported.getFinishedSpans();
  expect(answered?.status.code).toBe(SpanStatusCode.ERROR);
  expect(refused?.status.code).toBe(SpanStatusCode.ERROR);
  expect(refused?.attributes["relay.outcome"]).toBe("refused");
});

test("the trace id of a context, when it has a valid one", () => {
  expect(traceIdOf(callerTrace(caller))).toBe(TRACE);
  expect(traceIdOf(callerTrace(new Headers({ traceparent: "00-zz-yy-01" })))).toBeUndefined();
  expect(traceIdOf(untraced)).toBeUndefined();
});
