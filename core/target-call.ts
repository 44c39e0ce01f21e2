/**
 * One call to a target, whoever makes it: the worker (async, sync) and the edge (stream). It signs
 * the body, builds the request (`targetRequest`), bounds it with the target's timeout and calls
 * through the runtime's `CallTarget`, which checks (and pins) the address where it connects. A
 * call that gets no answer comes back as a typed failure, never as a throw.
 */
import type { DeliveryTarget } from "./model.ts";
import { readCapped, readFirst, TOO_LARGE } from "./read-capped.ts";
import { type Hmac, type SigningKey, webhookHeaders } from "./signing.ts";
import {
  type CallTarget,
  deliveryId,
  type TargetAnswer,
  TargetRefused,
  targetRequest,
} from "./target-request.ts";
import {
  endFailed,
  type Span,
  spanAttribute,
  startClientSpan,
  type TraceContext,
  traceHeaders,
} from "./tracing.ts";
import { outgoingCall, type RunTransform, sandboxCall } from "./transform.ts";

export interface TargetCallInput {
  requestId: string;
  /** Whose call it is: a transformation waits for a sandbox thread in this project's line. */
  project: string;
  target: DeliveryTarget;
  /** 1 for the first try. */
  attempt: number;
  /** The caller's forwardable headers (`forwardableHeaders`). */
  callerHeaders: Record<string, string>;
  body: Uint8Array<ArrayBuffer>;
  /** The endpoint's signing keys: those that sign at `signedAt` sign the body. */
  signingKeys: SigningKey[];
  /** The stack's clock (the dev clock's, under tests). */
  signedAt: Date;
  /** The runtime's fastest HMAC; Web Crypto's when absent. */
  hmac?: Hmac;
  /** The caller's own: a caller hanging up, an activity cancelled. */
  signal: AbortSignal;
  /**
   * What the target's timeout bounds: the wait for its answer to start (a stream, which then
   * runs as long as it streams), or the whole answer, its body read to the end (async, sync).
   */
  timeoutBounds: "start" | "answer";
  /** The span the attempt's own span is a child of (the edge's, an activity's). */
  trace: TraceContext;
  /** Runs the target's transformation, when it has one (the runtime's sandbox threads). */
  transform: RunTransform;
}

/** Why a call came to no answer, with what the request log says of it. */
export interface TargetFailure {
  /**
   * refused: the target rules refuse its address; transform: its transformation failed. Either
   * way it was never reached.
   */
  kind: "refused" | "timeout" | "unreachable" | "transform";
  message: string;
}

/** A target's answer, its body still to come. */
export interface Answered {
  answer: TargetAnswer;
  /**
   * Aborted by the caller's signal, by the timeout while it bounds the whole answer, or by
   * `discardAnswer`: the body is read under it.
   */
  signal: AbortSignal;
  /** Whether the target's timeout passed. */
  timedOut(): boolean;
  /** Ends the call, the body left unread (and its connection with it). */
  drop(reason: unknown): void;
  /** Its answer read or dropped: its timeout stops, and the caller's signal no longer reaches it. */
  ended(): void;
}

/** Its transformation dropped the call (returned null): the target was not called. */
export const DROPPED = { dropped: true } as const;

export type TargetCallResult = Answered | { failure: TargetFailure } | typeof DROPPED;

/** Calls the target once, through `callTarget`; its answer as it starts to arrive, or why none. */
export async function sendToTarget(
  callTarget: CallTarget,
  call: TargetCallInput,
): Promise<TargetCallResult> {
  const { requestId, target } = call;
  const outgoing = await transformedCall(call);
  if ("failure" in outgoing || "dropped" in outgoing) return outgoing;
  const { body } = outgoing;
  const signature = await webhookHeaders(
    call.signingKeys,
    deliveryId(requestId, target),
    call.signedAt,
    body,
    call.hmac,
  );
  const bounds = callBounds(call.signal, target.timeoutSeconds * 1000);
  const { signal } = bounds;
  const traced = startClientSpan(`POST ${target.name}`, call.trace, {
    [spanAttribute.requestId]: requestId,
    [spanAttribute.target]: target.name,
    [spanAttribute.attempt]: call.attempt,
  });
  try {
    const answer = await callTarget(
      outgoing.url,
      targetRequest({
        requestId,
        target,
        attempt: call.attempt,
        callerHeaders: call.callerHeaders,
        transformedHeaders: outgoing.headers,
        signature,
        traceHeaders: traceHeaders(traced.context),
        body,
        signal,
      }),
    );
    endAnswered(traced.span, answer.status);
    // A stream runs as long as it streams: its timeout bounded the wait for this start only.
    if (call.timeoutBounds === "start") bounds.stopTimeout();
    return { answer, signal, timedOut: bounds.timedOut, drop: bounds.drop, ended: bounds.ended };
  } catch (error) {
    const failure = targetFailure(error, bounds.timedOut());
    bounds.ended();
    traced.span.setAttribute(spanAttribute.outcome, failure.kind);
    endFailed(traced.span, failure.kind);
    return { failure };
  }
}

/** The call as the target's transformation leaves it, or as it came when it has none. */
async function transformedCall(
  call: TargetCallInput,
): Promise<
  | { url: string; headers?: Record<string, string>; body: Uint8Array<ArrayBuffer> }
  | { failure: TargetFailure }
  | typeof DROPPED
> {
  const { target } = call;
  if (target.transform === undefined) return { url: target.targetUrl, body: call.body };
  const handed = sandboxCall(
    target.targetUrl,
    { ...call.callerHeaders, ...target.headers },
    call.body,
  );
  const outcome = await call.transform(call.project, target.transform, handed);
  if ("dropped" in outcome) return DROPPED;
  if ("error" in outcome) {
    return {
      failure: { kind: "transform", message: `its transformation failed: ${outcome.error}` },
    };
  }
  return outgoingCall(target.targetUrl, outcome.call, call.body);
}

/**
 * The attempt's span ends as its answer starts (a stream's runs on in the edge's span): a 5xx is
 * an error of the target's, any other status is the target's answer.
 */
function endAnswered(span: Span, status: number): void {
  span.setAttribute(spanAttribute.httpStatus, status);
  if (status >= 500) endFailed(span, `the target answered ${status}`);
  else span.end();
}

/**
 * An answer's whole body, or TOO_LARGE past `limit` bytes (the rest left unread); a body that
 * fails, or outlasts the timeout, is the call's failure.
 */
export async function readAnswer(
  answered: Answered,
  limit: number,
): Promise<{ body: Uint8Array<ArrayBuffer> | typeof TOO_LARGE } | { failure: TargetFailure }> {
  try {
    const body = await readCapped(answered.answer.body, limit, answered.signal);
    if (body === TOO_LARGE) discardAnswer(answered);
    return { body };
  } catch (error) {
    return { failure: targetFailure(error, answered.timedOut()) };
  } finally {
    answered.ended();
  }
}

/**
 * An async answer's first `limit` bytes, for the request log: what the target said beside its
 * status. Never fails: a body that fails or outlasts the timeout keeps what was read, marked
 * truncated (the status already decided the attempt).
 */
export async function readAnswerStart(
  answered: Answered,
  limit: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  try {
    return await readFirst(answered.answer.body, limit, answered.signal);
  } catch {
    discardAnswer(answered);
    return { bytes: new Uint8Array(), truncated: true };
  } finally {
    answered.ended();
  }
}

/** Drops an answer's body unread: only its status and headers count. */
export function discardAnswer(answered: Answered): void {
  answered.drop(new DOMException("the answer's body is not read", "AbortError"));
  answered.ended();
}

/** A call's failure: refused by the target rules, timed out, or any other (unreachable). */
export function targetFailure(error: unknown, timedOut: boolean): TargetFailure {
  if (error instanceof TargetRefused) return { kind: "refused", message: error.message };
  return { kind: timedOut ? "timeout" : "unreachable", message: describeError(error) };
}

/** An error in the log: its name and message, and what caused it (often the only useful part). */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const { cause } = error;
  const described = `${error.name}: ${error.message}`;
  return cause instanceof Error ? `${described} (${cause.message})` : described;
}

/**
 * The call's one signal, aborted by the caller's, by the target's timeout (with a TimeoutError, as
 * `AbortSignal.timeout`) or by `drop`, its timer cleared once the call `ended`. One controller, not
 * `AbortSignal.any` of three over `AbortSignal.timeout`: on Node 20 those left each attempt's
 * signals and timer to its timeout (30 s by default), 62 µs and 4.6 KB of heap an attempt against
 * 11 µs and none (docs/benchmarks.md, Every kind of call).
 */
function callBounds(caller: AbortSignal, timeoutMs: number) {
  const controller = new AbortController();
  const follow = () => controller.abort(caller.reason);
  if (caller.aborted) follow();
  else caller.addEventListener("abort", follow, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
  }, timeoutMs);
  const stopTimeout = () => clearTimeout(timer);
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    drop: (reason: unknown) => controller.abort(reason),
    stopTimeout,
    ended: () => {
      stopTimeout();
      caller.removeEventListener("abort", follow);
    },
  };
}
