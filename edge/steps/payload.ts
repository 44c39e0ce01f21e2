import { RelayError } from "../../core/errors.ts";
import type { PayloadValidator } from "../../core/schema.ts";
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

/**
 * With a schema, the body must be JSON that satisfies it (415, then 422 with details). Without
 * one, a body that says it is JSON must still be JSON; any other body passes as it is.
 */
function checkPayload(
  body: Uint8Array,
  contentType: string | null,
  validate: PayloadValidator | null,
) {
  const saysJson = /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType ?? "");
  if (!validate && !saysJson) return;
  if (validate && body.byteLength > 0 && !saysJson) {
    throw new RelayError(
      "unsupported_media_type",
      "this endpoint takes Content-Type: application/json",
    );
  }
  let payload: unknown = null;
  if (body.byteLength > 0) {
    try {
      payload = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
    } catch {
      throw new RelayError("unsupported_media_type", "the body is not valid JSON");
    }
  }
  const problems = validate?.(payload, body.byteLength) ?? [];
  if (problems.length > 0) {
    throw new RelayError(
      "validation_failed",
      "the payload does not match the endpoint's schema",
      problems,
    );
  }
}
