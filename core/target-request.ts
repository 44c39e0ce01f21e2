/**
 * One call to a target, as the worker (async, sync) and the edge (stream) both make it: the
 * same headers in the same precedence, the exact body bytes, and no redirect followed.
 */
import { layeredHeaders } from "./headers.ts";
import { CDN_LOOP } from "./loop.ts";
import type { DeliveryTarget } from "./model.ts";

export interface TargetCall {
  requestId: string;
  target: DeliveryTarget;
  /** 1 for the first try. */
  attempt: number;
  /** The caller's forwardable headers (`forwardableHeaders`). */
  callerHeaders: Record<string, string>;
  /**
   * The headers a transformation handed back (core/transform.ts): sent instead of the caller's
   * and the target's configured ones. Relay's own still come last.
   */
  transformedHeaders?: Record<string, string> | undefined;
  /** The `webhook-*` headers signing this body. */
  signature: Record<string, string>;
  /** `traceparent` naming the attempt's span (replacing the caller's); empty when untraced. */
  traceHeaders: Record<string, string>;
  body: Uint8Array<ArrayBuffer>;
  signal: AbortSignal;
}

/** Names one target's delivery of a request; it is also the signed `webhook-id`. */
export function deliveryId(requestId: string, target: Pick<DeliveryTarget, "id">): string {
  return `${requestId}.${target.id}`;
}

/** A call's fetch init, as `targetRequest` makes it. */
export interface TargetInit {
  method: "POST";
  headers: Headers;
  body: Uint8Array<ArrayBuffer>;
  redirect: "manual";
  signal: AbortSignal;
}

/**
 * The fetch init of a call. A redirect is the target's answer, never followed: its Location was
 * never checked against the target rules, so following it could reach any internal address.
 * Caller headers come first, the target's configured ones replace them (or a transformation's
 * replace both), Relay's own come last.
 * The CDN-Loop the edge marked (`forwardableHeaders`) is Relay's own: no configured header
 * replaces it, so a target cannot hide a loop through itself.
 */
export function targetRequest(call: TargetCall): TargetInit {
  const cdnLoop = call.callerHeaders[CDN_LOOP];
  return {
    method: "POST",
    headers: layeredHeaders(
      ...(call.transformedHeaders
        ? [call.transformedHeaders]
        : [call.callerHeaders, call.target.headers]),
      {
        ...(cdnLoop && { [CDN_LOOP]: cdnLoop }),
        "x-relay-request-id": call.requestId,
        "x-relay-delivery-id": deliveryId(call.requestId, call.target),
        "x-relay-attempt": String(call.attempt),
        ...call.traceHeaders,
        ...call.signature,
      },
    ),
    body: call.body,
    redirect: "manual",
    signal: call.signal,
  };
}

/** A target's answer: its body as it arrives, decoded of gzip, deflate or br. */
export interface TargetAnswer {
  status: number;
  headers: Headers;
  body: AsyncIterable<Uint8Array> | null;
}

/**
 * One call to a target, as each runtime makes it: no redirect followed, and only to addresses the
 * target rules allow, checked where it connects. A refused address rejects with `TargetRefused`.
 */
export type CallTarget = (url: string, init: TargetInit) => Promise<TargetAnswer>;

/** The target's address is one the rules refuse; the message says which and why. */
export class TargetRefused extends Error {}
