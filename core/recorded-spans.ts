/**
 * For tests of code that makes spans: an OpenTelemetry SDK that keeps every finished span in
 * memory (`reset` forgets them). OpenTelemetry takes one global provider per process, and test
 * files share a process (vitest.config.ts, isolate: false), so every caller shares one.
 */
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

let exported: InMemorySpanExporter | undefined;

export function recordSpans(): InMemorySpanExporter {
  if (!exported) {
    exported = new InMemorySpanExporter();
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exported)] }).register();
  }
  exported.reset();
  return exported;
}
