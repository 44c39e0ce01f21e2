import { RelayError } from "../../core/errors.ts";
import { idempotencyKeyProblem } from "../../core/idempotency.ts";
import type { Routed, Step, With } from "../pipeline.ts";

/** A well-formed Idempotency-Key, on an endpoint whose answer a repeat can be given again. */
export const idempotency: Step<Routed, Routed & With<"idempotencyKey">> =
  async function idempotency(envelope, next) {
    const key = envelope.request.headers.get("idempotency-key");
    if (key !== null) {
      const problem = idempotencyKeyProblem(key);
      if (problem) throw new RelayError("bad_request", problem);
      if (envelope.endpoint.targets.some((t) => t.deliveryMode === "stream")) {
        throw new RelayError(
          "bad_request",
          "Idempotency-Key is not supported on an endpoint with a stream target: a stream cannot be answered twice",
        );
      }
    }
    return next(Object.assign(envelope, { idempotencyKey: key }));
  };
