/**
 * Stream targets, proxied by the edge itself: the target's answer flows back chunk by chunk as
 * it is produced, metered for billing, and a target that cuts its stream cuts the caller's.
 */
import { StreamMeter } from "../core/billing.ts";
import { type StreamStart, skippedTargets } from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { forwardableHeaders, safeResponseHeaders } from "../core/headers.ts";
import { loopMark } from "../core/loop.ts";
import type { SigningKey } from "../core/signing.ts";
import { sendToTarget, type TargetFailure } from "../core/target-call.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { EdgeDeps } from "./deps.ts";
import { type InboundRequest, skippedAnswer } from "./pipeline.ts";

export interface StreamCall {
  /** The caller's request: its headers to forward, its signal to follow. */
  request: InboundRequest;
  body: Uint8Array<ArrayBuffer>;
  /** Relay's own answer headers (key status, rate limit, request id). */
  responseHeaders: Headers;
  /** The endpoint's signing keys. */
  signingKeys: SigningKey[];
  /** The edge's span: the attempt's is its child. */
  trace: TraceContext;
  /**
   * Told once, when the answer's first chunk is on its way to the caller (or the answer ended
   * or failed first): what can wait goes after the first byte.
   */
  answerBegun?: () => void;
}

/**
 * Upstream is asked for `identity`, so nothing compresses and so holds back the chunks (an answer
 * compressed anyway comes decoded); the caller hanging up aborts the upstream call through the
 * signal. The target's timeout bounds the wait for its answer to start, not the stream's length.
 * Only the call is on the way to the first byte: its address is checked where it connects, and
 * the stream is recorded once it ends.
 */
export async function proxyStream(
  deps: EdgeDeps,
  call: StreamCall,
  stream: StreamStart,
): Promise<Response> {
  const { requestId, target } = stream;
  const started = performance.now();
  const record = (
    statusCode: number | null,
    bytes: number,
    error: string | null,
    skipped = stream.skipped,
  ) => {
    const latencyMs = Math.round(performance.now() - started);
    deps.recordStream({ ...stream, statusCode, latencyMs, bytes, error, skipped });
  };
  const callerHeaders = forwardableHeaders(call.request.headers, loopMark(deps.edgeDomain));
  callerHeaders["accept-encoding"] = "identity";
  const sent = await sendToTarget(deps.callTarget, {
    requestId,
    target,
    attempt: 1,
    callerHeaders,
    body: call.body,
    signingKeys: call.signingKeys,
    signedAt: deps.state.now(),
    hmac: deps.hmac,
    signal: call.request.signal,
    timeoutBounds: "start",
    trace: call.trace,
    project: stream.project,
    transform: deps.transform,
  });
  const answerBegun = call.answerBegun ?? (() => {});
  if ("dropped" in sent) {
    // Logged as a target its transformation skipped: the request log names it, nothing charged.
    const skipped = [...(stream.skipped ?? []), ...skippedTargets([target], "transform")];
    answerBegun();
    record(null, 0, "skipped: its transformation dropped the call", skipped);
    return skippedAnswer(requestId, call.responseHeaders);
  }
  if ("failure" in sent) {
    const failure = callFailure(sent.failure);
    answerBegun();
    record(null, 0, failure.logged);
    throw failure.answer;
  }
  const upstream = sent.answer;
  const headers = answerHeaders(upstream.headers, call.responseHeaders, requestId);
  const meter = new StreamMeter(upstream.headers.get("content-type"));
  const body = metered(upstream.body, meter, {
    begun: answerBegun,
    ended: (cut) =>
      record(upstream.status, meter.finish(), cut ? "the stream was cut short" : null),
  });
  return new Response(body, { status: upstream.status, headers });
}

/** Why a call got no answer: in the request log, and to the caller. */
function callFailure(failure: TargetFailure): { logged: string; answer: RelayError } {
  if (failure.kind === "transform") {
    const answer = new RelayError("transform_failed", `the stream target's ${failure.message}`);
    return { logged: failure.message, answer };
  }
  if (failure.kind === "refused") {
    return {
      logged: failure.message,
      answer: new RelayError("target_unreachable", "the stream target's address is refused"),
    };
  }
  const [code, message] =
    failure.kind === "timeout"
      ? (["target_timeout", "the stream target did not answer in time"] as const)
      : (["target_unreachable", "the stream target could not be reached"] as const);
  return { logged: message, answer: new RelayError(code, message) };
}

/**
 * The target's body passed on as it is, counted on the way; `begun` runs once, after the first
 * chunk was handed on (or at the end of a body without any), and `ended` once, when the body
 * ends or is cut short (the caller hung up, the target failed). A target's failure errors the
 * stream, so the caller's connection is cut too rather than ended as if the answer were whole.
 */
function metered(
  body: AsyncIterable<Uint8Array> | null,
  meter: StreamMeter,
  on: { begun: () => void; ended: (cut: boolean) => void },
): ReadableStream<Uint8Array> | null {
  let begun = false;
  const begin = () => {
    if (begun) return;
    begun = true;
    // On a timer: it runs once the adapter has written the head and first bytes.
    setTimeout(on.begun, 0);
  };
  let ended = false;
  const end = (cut: boolean) => {
    if (ended) return;
    ended = true;
    begin();
    on.ended(cut);
  };
  if (!body) {
    end(false);
    return null;
  }
  const chunks = body[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await chunks.next();
        if (done) {
          controller.close();
          end(false);
          return;
        }
        meter.add(value);
        controller.enqueue(value);
        begin();
      } catch (error) {
        controller.error(error);
        end(true);
      }
    },
    async cancel(reason) {
      end(true);
      await chunks.return?.(reason).catch(() => {});
    },
  });
}

/** A target's safe answer headers, plus Relay's own (key status, rate limit, request id). */
export function answerHeaders(
  fromTarget: Headers,
  relayHeaders: Headers,
  requestId: string,
): Headers {
  const headers = safeResponseHeaders(fromTarget);
  for (const [name, value] of relayHeaders) headers.set(name, value);
  headers.set("x-relay-request-id", requestId);
  return headers;
}
