/**
 * Idempotency-Key. A repeat of a call (same project, endpoint, API key and Idempotency-Key)
 * answers the first call's answer and queues nothing, with no store of Relay's own: the request id
 * is derived from them, so a repeat starts the same workflow id, and the start's own request id
 * carries the body's hash. Temporal deduplicates a start whose request id it has seen (same body)
 * and refuses another one for the same workflow id (a different body), for as long as it keeps
 * the first workflow: while it runs and for the namespace's retention after.
 */
import { base64url } from "./secrets.ts";

export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Why an Idempotency-Key header value is refused (400), or null. */
export function idempotencyKeyProblem(value: string): string | null {
  if (value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    return `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are the point.
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    return "Idempotency-Key may not contain control characters";
  }
  return null;
}

export interface Idempotent {
  /** The request (and workflow) id every repeat of the call shares. */
  requestId: string;
  /** Names the body: a repeat with another body gets another tag, and a conflict. */
  bodyTag: string;
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

export async function idempotent(
  call: {
    project: string;
    line: string;
    endpoint: string;
    /** The caller's API key: each key (so each mode) has keys of its own, as at Stripe. */
    apiKeyId: string;
    key: string;
  },
  body: Uint8Array<ArrayBuffer>,
): Promise<Idempotent> {
  // Length-prefixed parts, so no two different calls can join into the same bytes.
  const scope = [call.project, call.line, call.endpoint, call.apiKeyId, call.key]
    .map((part) => `${part.length}:${part}`)
    .join("");
  const id = await sha256(new TextEncoder().encode(scope));
  return {
    requestId: `req_${base64url(id.subarray(0, 18))}`,
    bodyTag: base64url((await sha256(body)).subarray(0, 18)),
  };
}
