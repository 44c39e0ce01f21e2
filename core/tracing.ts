/**
 * Relay's spans, on OpenTelemetry's API alone: runtime-neutral, and free when no SDK is
 * registered (each process registers one only when OTEL_EXPORTER_OTLP_ENDPOINT is set). The API's
 * own no-op then answers non-recording spans, and nothing is injected into a call: the caller's
 * `traceparent` reaches the target as it came. Attributes name the request, never its body, key
 * or secrets.
 */
import {
  type Attributes,
  type Context,
  context as contexts,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { RelayError } from "./errors.ts";

export { type Context as TraceContext, type Span, SpanKind } from "@opentelemetry/api";

/** The attribute names Relay's spans carry. */
export const spanAttribute = {
  requestId: "relay.request_id",
  project: "relay.project",
  /** `{line}/{endpoint}` */
  endpoint: "relay.endpoint",
  target: "relay.target",
  attempt: "relay.attempt",
  /** A refused call's error code (docs/design.md's error body). */
  refusal: "relay.refusal",
  /** Why an attempt got no answer: `timeout`, `unreachable`, `refused` (its address). */
  outcome: "relay.outcome",
  httpStatus: "http.response.status_code",
  workflowId: "temporalWorkflowId",
} as const;

/** A W3C trace id, as the request log keeps it: 32 lowercase hex digits. */
export const TRACE_ID = /^[0-9a-f]{32}$/;

const tracer = () => trace.getTracer("relay");

/** The context a caller's W3C `traceparent` (and `tracestate`) continue; the root when none. */
export function callerTrace(headers: Headers): Context {
  return propagation.extract(ROOT_CONTEXT, headers, {
    keys: (carrier) => [...carrier.keys()],
    get: (carrier, key) => carrier.get(key) ?? undefined,
  });
}

/** No trace: a call made outside any span (and the envelope's before the edge's span starts). */
export const untraced: Context = ROOT_CONTEXT;

/** The context the running code is in (an activity's span, on a worker that traces). */
export const activeTrace = (): Context => contexts.active();

/** A span of Relay's, a child of `parent`, and the context it is the parent in. */
export function startSpan(
  name: string,
  parent: Context,
  attributes: Attributes,
  kind: SpanKind = SpanKind.INTERNAL,
): { span: Span; context: Context } {
  const span = tracer().startSpan(name, { kind, attributes }, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** A client span around one outgoing call (a workflow start, a target's attempt). */
export function startClientSpan(name: string, parent: Context, attributes: Attributes) {
  return startSpan(name, parent, attributes, SpanKind.CLIENT);
}

/** `traceparent` (and `tracestate`) naming `context`'s span; empty when nothing traces. */
export function traceHeaders(context: Context): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context, carrier);
  return carrier;
}

/** The trace a context belongs to, when it is a valid one (the request log keeps it). */
export function traceIdOf(context: Context): string | undefined {
  const spanContext = trace.getSpanContext(context);
  return spanContext && trace.isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
}

/** Marks the span of `context` with a refusal's error code. */
export function markRefused(context: Context, code: string): void {
  trace.getSpan(context)?.setAttribute(spanAttribute.refusal, code);
}

/** Ends `span` as failed, with a message that names no secret. */
export function endFailed(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}

/**
 * `run`'s result, `span` ended as it settles: failed with the error's code when it throws (a
 * RelayError's; "failed" for anything else), or with `failure`'s message for a result it names.
 */
export async function endingSpan<T>(
  span: Span,
  run: () => Promise<T>,
  failure: (result: T) => string | undefined = () => undefined,
): Promise<T> {
  let result: T;
  try {
    result = await run();
  } catch (error) {
    endFailed(span, error instanceof RelayError ? error.code : "failed");
    throw error;
  }
  const message = failure(result);
  if (message) endFailed(span, message);
  else span.end();
  return result;
}
