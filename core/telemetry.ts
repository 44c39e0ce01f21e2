/**
 * The OpenTelemetry SDK a process registers when it exports traces: only when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, so a stack without a collector
 * keeps the API's no-op and pays nothing. Spans leave over OTLP/HTTP (JSON) in batches; the
 * exporter itself reads the standard variables (endpoint, headers, timeout), the resource
 * OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Runtime-neutral: the edge on Deno runs it too.
 * It constructs; nothing is sent until spans end.
 */
import type { ContextManager } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { envDetectorSync, Resource } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";

export interface Tracing {
  /** Where finished spans go: the worker hands it to Temporal's workflow span sink too. */
  processor: SpanProcessor;
  resource: Resource;
  /** Sends what is still queued, and stops. */
  shutdown(): Promise<void>;
}

/** The variables that turn export on, as each process's config parsed them. */
export interface TracingConfig {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
}

/**
 * Registers the SDK as the process's tracer provider, named `serviceName` unless
 * OTEL_SERVICE_NAME says otherwise; null (and nothing registered) unless `config` asks for traces.
 * Node passes its AsyncLocalStorage context manager, so a span follows its code across awaits;
 * the edge passes its spans' contexts explicitly and needs none.
 */
export function startTracing(
  config: TracingConfig,
  serviceName: string,
  contextManager?: ContextManager,
): Tracing | null {
  if (!config.OTEL_EXPORTER_OTLP_ENDPOINT && !config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    return null;
  }
  const resource = new Resource({ "service.name": serviceName }).merge(envDetectorSync.detect());
  const processor = new BatchSpanProcessor(new OTLPTraceExporter());
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  // The W3C trace-context propagator (and baggage) is the default one registered.
  provider.register(contextManager ? { contextManager } : {});
  return { processor, resource, shutdown: () => provider.shutdown() };
}
