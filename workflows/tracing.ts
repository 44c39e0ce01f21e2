/**
 * The worker's part of a trace: each workflow's span is a child of the span in its start's
 * header (the edge's `StartWorkflow`), made by Relay's own workflow interceptor
 * (trace-interceptors.ts, which says why not Temporal's); each activity's span, made by Temporal's
 * OpenTelemetry activity interceptor, is a child of its workflow's; an attempt's call
 * (core/target-call.ts) is a child of its activity's. Used only when the process exports traces:
 * otherwise no interceptor runs.
 */
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { millisToHrTime } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from "@temporalio/interceptors-opentelemetry";
import type { InjectedSinks, WorkerOptions } from "@temporalio/worker";
import { startTracing, type TracingConfig } from "../core/telemetry.ts";
import type { TraceSinks, WorkflowSpan } from "./trace-interceptors.ts";

export function workerTracing(config: TracingConfig) {
  // An activity's span follows its code across awaits, to the attempt's call.
  const tracing = startTracing(
    config,
    "relay-worker",
    new AsyncLocalStorageContextManager().enable(),
  );
  if (!tracing) return { traced: false, options: {}, shutdown: async () => {} };
  const { processor, resource } = tracing;
  const sinks: InjectedSinks<TraceSinks> = {
    traces: { workflowEnded: { fn: (_info, span) => processor.onEnd(readable(span, resource)) } },
  };
  const options: Pick<WorkerOptions, "interceptors" | "sinks"> = {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks,
  };
  // The workflow's own span comes from the traced workflow bundle (workflows/bundle.ts).
  return { traced: true, options, shutdown: tracing.shutdown };
}

/** A workflow's span as the SDK's processors take a finished one. */
function readable(span: WorkflowSpan, resource: Resource): ReadableSpan {
  const spanContext = { traceId: span.traceId, spanId: span.spanId, traceFlags: span.traceFlags };
  return {
    name: span.name,
    kind: SpanKind.INTERNAL,
    spanContext: () => spanContext,
    parentSpanId: span.parentSpanId,
    startTime: millisToHrTime(span.startMs),
    endTime: millisToHrTime(span.endMs),
    duration: millisToHrTime(span.endMs - span.startMs),
    status:
      span.error === undefined
        ? { code: SpanStatusCode.OK }
        : { code: SpanStatusCode.ERROR, message: span.error },
    attributes: span.attributes,
    links: [],
    events: [],
    ended: true,
    resource,
    instrumentationLibrary: { name: "relay" },
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}
