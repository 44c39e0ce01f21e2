/**
 * A body against its endpoint: with a schema it must be JSON that satisfies it, and a body that
 * says it is JSON must be JSON. The edge checks every call so (edge/steps/payload.ts), and the
 * control plane a body sent again from the request log.
 */
import { RelayError } from "./errors.ts";
import type { JsonValue } from "./model.ts";
import type { PayloadValidator } from "./schema.ts";

/**
 * With a schema, the body must be JSON that satisfies it (415, then 422 with details). Without
 * one, a body that says it is JSON must still be JSON; any other body passes as it is. Answers the
 * body parsed, when it was (a non-empty JSON body), for whatever reads it next (filters).
 */
export function checkPayload(
  body: Uint8Array,
  contentType: string | null,
  validate: PayloadValidator | null,
): JsonValue | undefined {
  const saysJson = /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType ?? "");
  if (!validate && !saysJson) return undefined;
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
  return body.byteLength > 0 ? (payload as JsonValue) : undefined;
}
