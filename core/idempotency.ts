/**
 * Idempotency-Key. A repeat of a call (same project, endpoint, API key and Idempotency-Key)
 * answers the first call's answer and queues nothing. The request id is derived from them, and
 * the body's tag from its hash. A call that goes as a workflow of its own (id = request id) is
 * told from its repeats by Temporal: the start's own request id carries the body's tag, and
 * Temporal deduplicates a start whose request id it has seen (same body) and refuses another one
 * for the same workflow id (a different body), while it keeps the first workflow. A call that
 * shares a batch workflow (an async-only, unordered endpoint's) is told apart in Postgres: its
 * key is claimed in the transaction that keeps the batch's start (store/idempotency.ts).
 */
import { RelayError } from "./errors.ts";
import type { IdDigest } from "./id-digest.ts";
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

/** The call's request id and its body's tag, each `digest`ed (core/id-digest.ts). */
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
  digest: IdDigest,
): Promise<Idempotent> {
  // Length-prefixed parts, so no two different calls can join into the same bytes.
  const scope = [call.project, call.line, call.endpoint, call.apiKeyId, call.key]
    .map((part) => `${part.length}:${part}`)
    .join("");
  const id = await digest(new TextEncoder().encode(scope));
  return {
    requestId: `req_${base64url(id.subarray(0, 18))}`,
    bodyTag: base64url((await digest(body)).subarray(0, 18)),
  };
}

/** A call's Idempotency-Key as it is claimed in Postgres (store/idempotency.ts). */
export interface KeyClaim {
  requestId: string;
  bodyTag: string;
}

/**
 * What claiming a key finds: none before it ("claimed"), or a first call with it that shared a
 * batch ("repeat" with the same body, "reused" with another) or went as a workflow of its own
 * ("own_workflow": the repeat goes that way too, where Temporal tells them apart).
 */
export type KeyClaimOutcome = "claimed" | (typeof EARLIER_CLAIMS)[number];

/** What an earlier claim makes of a call, in the contract's order (ClaimOutcome, 1 on). */
export const EARLIER_CLAIMS = ["repeat", "reused", "own_workflow"] as const;

/** A claim's outcome as the contract's ClaimOutcome numbers it (0: "claimed"). */
export const claimOutcomeNumber = (outcome: KeyClaimOutcome): number =>
  outcome === "claimed" ? 0 : EARLIER_CLAIMS.indexOf(outcome) + 1;

export const claimOutcomeOf = (number: number): KeyClaimOutcome =>
  EARLIER_CLAIMS[number - 1] ?? "claimed";

/** A repeat of a key with another body (422). */
export const keyReused = () =>
  new RelayError(
    "idempotency_key_reused",
    "this Idempotency-Key was already used with a different body",
  );
