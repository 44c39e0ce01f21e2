import { afterEach, expect, test } from "vitest";
import { recordSpans } from "../../core/recorded-spans.ts";
import { startTracing } from "../../core/telemetry.ts";
import { markRefused, traceHeaders } from "../../core/tracing.ts";
import type { Envelope } from "../pipeline.ts";
import { arrived, hookEndpoint } from "./testing.ts";
import { trace } from "./trace.ts";

const exported = recordSpans();
afterEach(() => exported.reset());

const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/**
 * The step around a `next` that answers `status`: having found the endpoint, or having refused
 * the call with `refusal` as the pipeline's error answer does. Answers the envelope it handed on.
 */
async function traced(envelope: Envelope, status: number, refusal?: string): Promise<Envelope> {
  let inner: Envelope | undefined;
  await trace(envelope, async (reached) => {
    inner = reached;
    if (refusal) markRefused(reached.trace, refusal);
    else Object.assign(reached, { project: "acme", endpoint: hookEndpoint() });
    return new Response(null, { status, headers: { "x-relay-request-id": "req_1" } });
  });
  if (!inner) throw new Error("next was not called");
  return inner;
}

test("the edge's span continues the caller's traceparent and names the request it answered", async () => {
  const inner = await traced(arrived({ headers: { traceparent: CALLER } }), 202);
  const [span] = exported.getFinishedSpans();
  expect(span?.name).toBe("POST /v1/hook");
  expect(span?.spanContext().traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  expect(span?.parentSpanId).toBe("00f067aa0ba902b7");
  expect(span?.attributes).toEqual({
    "relay.project": "acme",
    "relay.endpoint": "v1/hook",
    "relay.request_id": "req_1",
    "http.response.status_code": 202,
  });
  // What the steps inside are handed: the edge's span, whose traceparent they pass on.
  expect(traceHeaders(inner.trace).traceparent).toBe(
    `00-4bf92f3577b34da6a3ce929d0e0e4736-${span?.spanContext().spanId}-01`,
  );
});

test("without a caller's traceparent the span starts a trace; a refusal says its code, not who", async () => {
  await traced(arrived(), 401, "invalid_or_missing_key");
  const [span] = exported.getFinishedSpans();
  expect(span?.name).toBe("POST");
  expect(span?.parentSpanId).toBeUndefined();
  expect(span?.attributes).toEqual({
    "relay.refusal": "invalid_or_missing_key",
    "relay.request_id": "req_1",
    "http.response.status_code": 401,
  });
});

test("a process without OTEL_EXPORTER_OTLP_ENDPOINT registers nothing", () => {
  expect(startTracing({}, "relay-edge")).toBeNull();
});
