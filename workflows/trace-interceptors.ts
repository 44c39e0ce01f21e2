/**
 * Workflow code (Temporal's sandbox): a workflow's span, and its activities' parent. A workflow
 * started with a trace in its header (the edge's `StartWorkflow` span, `_tracer-data`, the
 * header Temporal's OpenTelemetry interceptors read) gets a `RunWorkflow:{type}` span, a child of
 * it; every activity it schedules carries that span in its own header, where Temporal's activity
 * interceptor (workflows/tracing.ts) makes the activity's span its child. The span leaves through
 * a sink once the workflow ends, never on replay.
 *
 * Why not Temporal's own workflow interceptors: they run the OpenTelemetry SDK inside the
 * sandbox, a context manager included, and cost the worker 4-7 ms of CPU per request measured
 * (about half again its work: docs/benchmarks.md, Tracing). This makes the same span from values
 * the workflow already has: its id from the run id, its times from the workflow's clock, so a
 * replay makes the same one and draws nothing from the workflow's random numbers.
 */
import type { Headers } from "@temporalio/common";
import {
  ContinueAsNew,
  defaultPayloadConverter,
  proxySinks,
  type Sinks,
  type WorkflowInterceptorsFactory,
  workflowInfo,
} from "@temporalio/workflow";
import { TRACE_HEADER } from "../core/temporal.ts";

/** A workflow's span as it leaves the sandbox. */
export interface WorkflowSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  /** W3C trace flags; 1: sampled. */
  traceFlags: number;
  startMs: number;
  endMs: number;
  /** Why the workflow failed; absent when it completed. */
  error?: string;
  attributes: Record<string, string>;
}

export interface TraceSinks extends Sinks {
  traces: { workflowEnded(span: WorkflowSpan): void };
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The trace a workflow's header names, when it names a well-formed one. */
function parentIn(headers: Headers) {
  const payload = headers[TRACE_HEADER];
  if (!payload) return null;
  const carrier = defaultPayloadConverter.fromPayload<{ traceparent?: unknown }>(payload);
  const match = TRACEPARENT.exec(String(carrier?.traceparent ?? ""));
  if (!match) return null;
  const [, traceId = "", spanId = "", flags = "00"] = match;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) };
}

export const interceptors: WorkflowInterceptorsFactory = () => {
  let traceparent: string | null = null;
  /** Activities get the workflow's span as their parent, when the workflow has one. */
  const traced = (headers: Headers): Headers =>
    traceparent
      ? { ...headers, [TRACE_HEADER]: defaultPayloadConverter.toPayload({ traceparent }) }
      : headers;
  return {
    inbound: [
      {
        async execute(input, next) {
          const parent = parentIn(input.headers);
          if (!parent) return next(input);
          const info = workflowInfo();
          // A run id is a UUID: its last 16 hex digits name the run's span.
          const spanId = info.runId.replaceAll("-", "").slice(-16).padStart(16, "0");
          const flags = parent.traceFlags.toString(16).padStart(2, "0");
          traceparent = `00-${parent.traceId}-${spanId}-${flags}`;
          const startMs = Date.now();
          let error: string | undefined;
          try {
            return await next(input);
          } catch (cause) {
            if (!(cause instanceof ContinueAsNew)) {
              error = cause instanceof Error ? cause.message : String(cause);
            }
            throw cause;
          } finally {
            if (parent.traceFlags & 1) {
              proxySinks<TraceSinks>().traces.workflowEnded({
                name: `RunWorkflow:${info.workflowType}`,
                traceId: parent.traceId,
                spanId,
                parentSpanId: parent.spanId,
                traceFlags: parent.traceFlags,
                startMs,
                endMs: Date.now(),
                ...(error !== undefined && { error }),
                attributes: { temporalWorkflowId: info.workflowId, run_id: info.runId },
              });
            }
          }
        },
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => next({ ...input, headers: traced(input.headers) }),
        scheduleLocalActivity: (input, next) => next({ ...input, headers: traced(input.headers) }),
      },
    ],
  };
};
