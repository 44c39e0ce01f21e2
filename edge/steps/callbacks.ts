import { callbacksOf } from "../../core/callbacks.ts";
import { RelayError } from "../../core/errors.ts";
import type { SavedTargetRules } from "../../core/targets.ts";
import type { Routed, Step, With } from "../pipeline.ts";

/**
 * The call's completion callbacks (core/callbacks.ts), each URL checked as a target's is where it
 * is saved (the address it resolves to is checked again where the callback connects). Only an
 * async target's delivery ends later: on an endpoint with a sync or stream target they are
 * refused, as a delay is.
 */
export function callbacks<In extends Routed>(
  rules: SavedTargetRules,
): Step<In, In & With<"callbacks">> {
  return async function callbacks(envelope, next) {
    const asked = callbacksOf(envelope.request.headers, rules);
    if ("problem" in asked) throw new RelayError("bad_request", asked.problem);
    if (asked.callbacks && envelope.endpoint.targets.some((t) => t.deliveryMode !== "async")) {
      throw new RelayError(
        "bad_request",
        "Relay-Callback and Relay-Failure-Callback apply to async endpoints only: this endpoint answers at once",
      );
    }
    return next(Object.assign(envelope, { callbacks: asked.callbacks }));
  };
}
