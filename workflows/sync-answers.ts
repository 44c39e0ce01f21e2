/**
 * Where a sync call handed to this worker (./sync-calls.ts) waits for its answer, and how a
 * batch's local activity makes the calls a listener here waits for, and only those.
 */
import { type SyncInput, type SyncOutcome, syncWorkflowId } from "../core/delivery.ts";

/** A call's answer as its listener gets it: the outcome, or why the call failed here. */
export type AnswerHere = { outcome: SyncOutcome } | { failed: unknown };

/** What a batch's activity did with each of its calls, in order. */
export type SyncReceipt = "answered" | "failed" | "not waited for here";

/**
 * The calls this worker's listener waits for, by call id (`syncWorkflowId`): a batch's
 * activity claims each before it makes it, and answers it here.
 */
export class SyncAnswers {
  private readonly waiting = new Map<string, (answer: AnswerHere) => void>();
  private readonly onClaim = new Map<string, () => void>();

  /**
   * Waits for `callId`'s answer. `withdraw` stops waiting unless the call was claimed: true when
   * it was not (and now never will be), false when it is being made and its answer is coming.
   */
  expect(callId: string): {
    answer: Promise<AnswerHere>;
    claimed: Promise<void>;
    withdraw(): boolean;
  } {
    const answer = new Promise<AnswerHere>((resolve) => {
      this.waiting.set(callId, resolve);
    });
    const claimed = new Promise<void>((resolve) => this.onClaim.set(callId, resolve));
    return {
      answer,
      claimed,
      withdraw: () => {
        this.onClaim.delete(callId);
        return this.waiting.delete(callId);
      },
    };
  }

  /** Takes a waited-for call, to make it: its answer goes to what this returns. */
  claim(callId: string): ((answer: AnswerHere) => void) | undefined {
    const settle = this.waiting.get(callId);
    this.waiting.delete(callId);
    this.onClaim.get(callId)?.();
    this.onClaim.delete(callId);
    return settle;
  }
}

/**
 * A batch's calls, made here at once, each answered to its listener as it ends: only those a
 * listener of this worker waits for; the others are not made (./sync-calls.ts says why). `makeCalls` makes the
 * claimed ones, an outcome each.
 */
export function callsWaitedHere(
  answers: SyncAnswers | undefined,
  calls: readonly SyncInput[],
  makeCalls: (claimed: SyncInput[]) => Promise<SyncOutcome>[],
): Promise<SyncReceipt[]> {
  const settles = calls.map((call) => answers?.claim(syncWorkflowId(call)));
  const made = makeCalls(calls.filter((_, i) => settles[i]));
  let next = 0;
  return Promise.all(
    settles.map(async (settle): Promise<SyncReceipt> => {
      if (!settle) return "not waited for here";
      const outcome = made[next++];
      try {
        if (!outcome) throw new Error("no outcome for a claimed call");
        settle({ outcome: await outcome });
        return "answered";
      } catch (error) {
        settle({ failed: error });
        return "failed";
      }
    }),
  );
}
