/**
 * For tests of code that makes spans: registers an OpenTelemetry SDK that keeps every finished
 * span in memory (`reset` forgets them).
 */
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

export function recordSpans(): InMemorySpanExporter {
  const exported = new InMemorySpanExporter();
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exported)] }).register();
  return exported;
}
