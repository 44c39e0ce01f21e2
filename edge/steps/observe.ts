/** The after-step that tells the log and the metrics of every answer. */
import { traceIdOf } from "../../core/tracing.ts";
import { type Answered, CALLER_LEFT, type EdgeDeps } from "../deps.ts";
import { type Envelope, endpointName, type Step } from "../pipeline.ts";

export function observe(onAnswer: EdgeDeps["observe"]): Step<Envelope> {
  return async function observe(envelope, next) {
    const started = performance.now();
    const response = await next(envelope);
    // The endpoint is named only once it was found, and the project with it.
    const { endpoint } = envelope;
    const answered: Answered = {
      project: endpoint ? (envelope.project ?? null) : null,
      endpoint: endpoint ? endpointName(endpoint) : null,
      // A caller gone before its answer is nginx's 499, not the 5xx nobody received.
      status: envelope.request.signal.aborted ? CALLER_LEFT : response.status,
      requestId: response.headers.get("x-relay-request-id"),
      seconds: (performance.now() - started) / 1000,
      traceId: traceIdOf(envelope.trace),
    };
    // A stream's log line and metrics wait for a timer, which runs once the adapter has written
    // its head and first bytes: they cost a quarter of a millisecond the first byte need not wait.
    if (endpoint?.targets.some((t) => t.deliveryMode === "stream")) {
      setTimeout(() => onAnswer?.(answered), 0);
    } else onAnswer?.(answered);
    return response;
  };
}
