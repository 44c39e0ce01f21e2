import { RelayError } from "../../core/errors.ts";
import type { Envelope, Step } from "../pipeline.ts";

/** Only POST is relayed (405, with Allow). */
export const method: Step<Envelope> = async function method(envelope, next) {
  if (envelope.request.method !== "POST") {
    envelope.responseHeaders.set("allow", "POST");
    throw new RelayError("method_not_allowed", "only POST is relayed");
  }
  return next(envelope);
};
