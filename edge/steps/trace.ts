/**
 * The first step: the edge's span, a child of the caller's `traceparent` (a new trace when it sent
 * none), around everything the call does. It ends with the answer's head; a stream's attempt and
 * the workflows it started run on under it.
 */
import { callerTrace, endFailed, SpanKind, spanAttribute, startSpan } from "../../core/tracing.ts";
import { type Envelope, endpointName, type Step } from "../pipeline.ts";

export const trace: Step<Envelope> = async function trace(envelope, next) {
  const edge = startSpan("POST", callerTrace(envelope.request.headers), {}, SpanKind.SERVER);
  envelope.trace = edge.context;
  const response = await next(envelope);
  const { span } = edge;
  if (span.isRecording()) {
    const { endpoint } = envelope;
    if (endpoint) {
      const name = endpointName(endpoint);
      span.updateName(`POST /${name}`);
      span.setAttribute(spanAttribute.project, envelope.project ?? "");
      span.setAttribute(spanAttribute.endpoint, name);
    }
    const requestId = response.headers.get("x-relay-request-id");
    if (requestId) span.setAttribute(spanAttribute.requestId, requestId);
    span.setAttribute(spanAttribute.httpStatus, response.status);
  }
  if (response.status >= 500) endFailed(span, `answered ${response.status}`);
  else span.end();
  return response;
};
