import { RelayError } from "../../core/errors.ts";
import type { Envelope, Next } from "../pipeline.ts";

/** Only POST is relayed (405, with Allow). */
export async function method<T extends Envelope>(envelope: T, next: Next<T>): Promise<Response> {
  if (envelope.request.method !== "POST") {
    envelope.responseHeaders.set("allow", "POST");
    throw new RelayError("method_not_allowed", "only POST is relayed");
  }
  return next(envelope);
}
