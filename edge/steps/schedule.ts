import { RelayError } from "../../core/errors.ts";
import { DELAY_HEADER, deliveryTime, NOT_BEFORE_HEADER } from "../../core/schedule.ts";
import type { Routed, Step, With } from "../pipeline.ts";
import type { EdgeState } from "../state.ts";

/**
 * When the call is to be delivered (core/schedule.ts), on the stack's clock. Only an async call
 * can wait: a sync or stream target answers the caller now, so a delay there is refused.
 */
export function schedule(
  state: Pick<EdgeState, "now">,
): Step<Routed & With<"idempotencyKey">, Routed & With<"idempotencyKey" | "notBefore">> {
  return async function schedule(envelope, next) {
    const headers = envelope.request.headers;
    const asked = { delay: headers.get(DELAY_HEADER), notBefore: headers.get(NOT_BEFORE_HEADER) };
    if (asked.delay === null && asked.notBefore === null) {
      return next(Object.assign(envelope, { notBefore: null }));
    }
    if (envelope.endpoint.targets.some((t) => t.deliveryMode !== "async")) {
      throw new RelayError(
        "bad_request",
        "Relay-Delay and Relay-Not-Before apply to async endpoints only: this endpoint answers at once",
      );
    }
    const time = deliveryTime(asked, state.now());
    if ("problem" in time) throw new RelayError("bad_request", time.problem);
    return next(Object.assign(envelope, { notBefore: time.notBefore }));
  };
}
