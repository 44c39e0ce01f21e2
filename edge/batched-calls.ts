/**
 * The calls a batcher (./batcher.ts) takes and what it answers them, and the rules of their
 * Idempotency-Keys within a group: a call that repeats the key of one before it in the group,
 * and what keys claimed before make of a group's calls. Pure.
 */
import type { CallReservation, ReservationRefusal, StoredBody } from "../core/billing.ts";
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import type { KeyClaim, KeyClaimOutcome } from "../core/idempotency.ts";
import type { LanePlace } from "../core/lanes.ts";
import type { TraceContext } from "../core/tracing.ts";

/** An immediate async call, ready to start: its input, its trace and the credits it holds. */
export interface BatchedCall {
  input: DeliveryInput;
  trace: TraceContext;
  reservation: CallReservation;
  /** Its body, when it travels by reference (`input.bodyRef`): stored as the call is accepted. */
  storedBody?: Uint8Array;
  /** Its Idempotency-Key, claimed as the call is accepted (store/idempotency.ts). */
  claim?: KeyClaim;
  /** An ordered call's place in its lane, joined as the call is accepted (store/lanes.ts). */
  lane?: LanePlace;
  /**
   * A mirror's async targets: its caller waits for its sync target's answer, not for this start,
   * so alone it may wait for calls to join it (./open-batches.ts).
   */
  mirrored?: true;
}

/**
 * A call started or a repeat of one (what its caller is told), refused by its reservation, not
 * queued (its body could not be stored: 503), a reuse of an Idempotency-Key with another body
 * (422), or one to go as a workflow of its own (a key's or an ordered call that could not share
 * a batch).
 */
export type BatchAnswer =
  | { accepted: Accepted }
  | { refused: ReservationRefusal }
  | { unstored: true }
  | { reused: true }
  | { alone: true };

/** Reserves and starts a call with its project's others of the moment. */
export type Batch = (call: BatchedCall) => Promise<BatchAnswer>;

/** Body chars (base64) a batch's input carries in all: Temporal warns past 256 KiB a payload. */
const BATCH_BODY_CHARS = 256 * 1024;

export const sumOf = (calls: readonly BatchedCall[], size: (call: BatchedCall) => number) =>
  calls.reduce((total, call) => total + size(call), 0);

export const deliveriesOf = (call: BatchedCall) => call.input.targets.length;

/** The bodies of `calls` that travel by reference, to store as they are accepted. */
export const storedBodiesOf = (calls: readonly BatchedCall[]): StoredBody[] =>
  calls.flatMap(({ input, storedBody }) =>
    storedBody ? [{ requestId: input.requestId, body: storedBody }] : [],
  );

/**
 * Whether `calls` fit in one batch workflow: `maxItems` deliveries (a batch makes every first
 * attempt in one local activity, so a fan-out's calls count by their deliveries) and its
 * input's bodies.
 */
export const fitOneWorkflow = (calls: readonly BatchedCall[], maxItems: number) =>
  sumOf(calls, deliveriesOf) <= maxItems &&
  sumOf(calls, (call) => call.input.bodyBase64.length) <= BATCH_BODY_CHARS;

export const zip = <A, B>(as: readonly A[], bs: readonly B[]): [A, B][] =>
  as.map((a, i) => [a, bs[i] as B]);

/**
 * The group's first call of each key (and every call without one), and how their answers
 * answer the whole group: a repeat as its first call, with another body 422 once the first was
 * accepted (alone when it was not: its own workflow tells them apart).
 */
export function repeatsInGroup(calls: readonly BatchedCall[]): {
  firsts: BatchedCall[];
  answersOfAll(answers: BatchAnswer[]): BatchAnswer[];
} {
  const firstOf = new Map<string, BatchedCall>();
  const firsts = calls.filter((call) => {
    if (!call.claim) return true;
    if (firstOf.has(call.claim.requestId)) return false;
    firstOf.set(call.claim.requestId, call);
    return true;
  });
  return {
    firsts,
    answersOfAll(answers) {
      const answerOf = new Map(zip(firsts, answers));
      return calls.map((call) => {
        const own = answerOf.get(call);
        if (own) return own;
        const first = firstOf.get(call.claim?.requestId ?? "") as BatchedCall;
        const answer = answerOf.get(first) as BatchAnswer;
        if (first.claim?.bodyTag === call.claim?.bodyTag) return answer;
        return "accepted" in answer ? { reused: true } : { alone: true };
      });
    },
  };
}

/**
 * Each call's answer once its group found keys claimed before (CallsAccepted.claims): a repeat
 * as its batched first call was, a reuse 422; the calls whose keys were theirs (or that had
 * none) as `rest` answers them, else alone.
 */
export function answersAfterClaims(
  calls: readonly BatchedCall[],
  claims: readonly KeyClaimOutcome[],
  rest: ReadonlyMap<BatchedCall, BatchAnswer>,
): BatchAnswer[] {
  return calls.map((call, i) => {
    const claim = claims[i];
    if (claim === "repeat") return { accepted: acceptedStatus(call.input) };
    if (claim === "reused") return { reused: true };
    return rest.get(call) ?? { alone: true };
  });
}
