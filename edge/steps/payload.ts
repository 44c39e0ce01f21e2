import { checkPayload } from "../../core/payload-check.ts";
import type { Received, Step } from "../pipeline.ts";

/** The body against the endpoint's schema, and a body that says it is JSON against JSON. */
export const payload: Step<Received> = async function payload(envelope, next) {
  checkPayload(
    envelope.body,
    envelope.request.headers.get("content-type"),
    envelope.compiled.validate,
  );
  return next(envelope);
};
