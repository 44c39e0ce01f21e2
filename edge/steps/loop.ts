import { RelayError } from "../../core/errors.ts";
import { CDN_LOOP, MAX_CDN_LOOP_LENGTH, MAX_LOOP_PASSES, passesThrough } from "../../core/loop.ts";
import type { Envelope, Step } from "../pipeline.ts";

/**
 * Refuses a request that has already passed through this Relay MAX_LOOP_PASSES times (its
 * CDN-Loop names `mark` that often): 508, before any key is looked at, nothing queued or charged.
 */
export function loop<T extends Envelope>(mark: string): Step<T> {
  return async function loop(envelope, next) {
    const cdnLoop = envelope.request.headers.get(CDN_LOOP);
    if (cdnLoop !== null) {
      if (cdnLoop.length > MAX_CDN_LOOP_LENGTH) {
        throw new RelayError(
          "bad_request",
          `the CDN-Loop header is over ${MAX_CDN_LOOP_LENGTH} characters`,
        );
      }
      if (passesThrough(cdnLoop, mark) > MAX_LOOP_PASSES) {
        throw new RelayError(
          "loop_detected",
          "this request has already passed through this Relay too many times",
        );
      }
    }
    return next(envelope);
  };
}
