/**
 * The worker's part of a trace (Temporal's OpenTelemetry interceptors): each workflow's span is a
 * child of the span in its start's header (the edge's `StartWorkflow`), each activity's of the
 * workflow's, and an attempt's call (core/target-call.ts) of its activity's. Workflow spans are
 * made in the sandbox and leave through a sink, only when the workflow runs new code (never on
 * replay). Used only when the process exports traces: otherwise no interceptor runs.
 */
import { createRequire } from "node:module";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from "@temporalio/interceptors-opentelemetry";
import type { WorkerOptions } from "@temporalio/worker";
import { startTracing, type TracingConfig } from "../core/telemetry.ts";

export function workerTracing(config: TracingConfig) {
  // An activity's span follows its code across awaits, to the attempt's call.
  const tracing = startTracing(
    config,
    "relay-worker",
    new AsyncLocalStorageContextManager().enable(),
  );
  if (!tracing) return { options: {}, shutdown: async () => {} };
  const options: Pick<WorkerOptions, "interceptors" | "sinks"> = {
    interceptors: {
      workflowModules: [
        createRequire(import.meta.url).resolve(
          "@temporalio/interceptors-opentelemetry/lib/workflow-interceptors",
        ),
      ],
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) },
  };
  return { options, shutdown: tracing.shutdown };
}
