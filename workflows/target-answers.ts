/**
 * A target's answer to an attempt: read (a sync one whole up to the cap, an async one's start),
 * kept for the log, and judged (an async attempt's verdict, a sync call's outcome).
 */
import { toBase64 } from "../core/base64.ts";
import {
  type AttemptSeen,
  type AttemptVerdict,
  attemptVerdict,
  LOGGED_ANSWER_BYTES,
  MAX_SYNC_ANSWER_BYTES,
  type SyncOutcome,
} from "../core/delivery.ts";
import type { TargetRetry } from "../core/model.ts";
import { TOO_LARGE } from "../core/read-capped.ts";
import { retryScheduleOf } from "../core/retry.ts";
import {
  readAnswer,
  readAnswerStart,
  sendToTarget,
  type TargetCallInput,
  type TargetFailure,
} from "../core/target-call.ts";
import type { CallTarget } from "../core/target-request.ts";
import type { LoggedAnswer } from "../store/attempt-log.ts";
import type { RetryPolicy } from "./activity-deps.ts";

/**
 * The call, and its answer: a sync one read whole up to the cap (its body null past it), an async
 * one's first bytes only, for the log (the rest left unread).
 */
export async function callAndRead(
  callTarget: CallTarget,
  input: TargetCallInput,
  sync: boolean,
): Promise<Pick<Sent, "answer" | "failure" | "dropped">> {
  const sent = await sendToTarget(callTarget, input);
  if ("dropped" in sent) return { answer: null, failure: null, dropped: true };
  if ("failure" in sent) return { answer: null, failure: sent.failure };
  const { status, headers } = sent.answer;
  if (!sync) {
    const { bytes, truncated } = await readAnswerStart(sent, LOGGED_ANSWER_BYTES);
    return { answer: { status, headers, body: bytes, truncated }, failure: null };
  }
  const read = await readAnswer(sent, MAX_SYNC_ANSWER_BYTES);
  if ("failure" in read) return { answer: null, failure: read.failure };
  const body = read.body === TOO_LARGE ? null : read.body;
  return { answer: { status, headers, body, truncated: body === null }, failure: null };
}

/** What the log keeps of an answer: its headers and the first LOGGED_ANSWER_BYTES of its body. */
export function loggedAnswer(answer: Answer): LoggedAnswer {
  const body = answer.body ?? new Uint8Array();
  return {
    headers: Object.fromEntries(answer.headers),
    bodyBase64: toBase64(body.subarray(0, LOGGED_ANSWER_BYTES)),
    truncated: answer.truncated || body.byteLength > LOGGED_ANSWER_BYTES,
  };
}

/** The verdict on an attempt at an async target, timed by its own retry policy over `policy`. */
export function verdictOn(
  { attempt, answer, failure, dropped, retry }: Sent,
  policy: RetryPolicy,
): AttemptVerdict {
  const transform: AttemptSeen["transform"] = dropped
    ? "dropped"
    : failure?.kind === "transform"
      ? "failed"
      : undefined;
  const seen = {
    status: answer?.status ?? null,
    retryAfter: answer?.headers.get("retry-after") ?? null,
    error: failure?.message ?? null,
    refused: failure?.kind === "refused",
    ...(transform && { transform }),
  };
  return attemptVerdict(seen, attempt, retryScheduleOf(policy, retry), new Date());
}

/** A target's answer to an attempt. */
interface Answer {
  status: number;
  headers: Headers;
  /** A sync answer's whole body (null when longer than the sync cap), an async one's start. */
  body: Uint8Array | null;
  /** The body goes on past what was read. */
  truncated: boolean;
}

/** What a call to a target came to. */
export interface Sent {
  attempt: number;
  answer: Answer | null;
  /** Why there is no answer: refused, timed out or unreachable, as the log says it. */
  failure: TargetFailure | null;
  /** Its transformation dropped the call: no answer, and no failure either. */
  dropped?: true;
  /** The target's own retry policy, as the target is now; absent: the deployment's. */
  retry?: TargetRetry | undefined;
}

/** An attempt an earlier one delivered, as the log keeps that one: its number and its 2xx. */
export function deliveredBefore(attempt: number, status: number): Sent {
  const answer = { status, headers: new Headers(), body: null, truncated: false };
  return { attempt, answer, failure: null };
}

/** What a sync call came to, as its caller is answered. */
export function syncOutcome({ answer, failure, dropped }: Sent): SyncOutcome {
  if (dropped) return { kind: "skipped" };
  if (failure?.kind === "transform") return { kind: "transform_failed", error: failure.message };
  if (!answer) {
    return failure?.kind === "timeout"
      ? { kind: "timeout" }
      : { kind: "unreachable", error: failure?.message ?? "" };
  }
  if (answer.body === null) return { kind: "too_large" };
  return {
    kind: "answered",
    status: answer.status,
    headers: Object.fromEntries(answer.headers),
    bodyBase64: Buffer.from(answer.body).toString("base64"),
  };
}
