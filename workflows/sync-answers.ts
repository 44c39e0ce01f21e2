/**
 * Where a sync call handed to this worker (./sync-calls.ts) waits for its answer, and how a
 * batch's local activity makes the calls a listener here waits for, and only those.
 */
import { type SyncInput, type SyncOutcome, syncWorkflowId } from "../core/delivery.ts";
import { type TraceContext, untraced } from "../core/tracing.ts";

/** A call's answer as its listener gets it: the outcome, or why the call failed here. */
export type AnswerHere = { outcome: SyncOutcome } | { failed: unknown };

/** What a batch's activity did with each of its calls, in order. */
export type SyncReceipt = "answered" | "failed" | "not waited for here";

/** A call claimed to be made, in the trace of its edge's hand-over (its attempt's parent). */
export interface ClaimedCall {
  call: SyncInput;
  trace: TraceContext;
}

interface Waiting {
  settle(answer: AnswerHere): void;
  claimed(): void;
  trace: TraceContext;
}

/**
 * The calls this worker's listener waits for, by call id (`syncWorkflowId`): a batch's
 * activity claims each before it makes it, and answers it here.
 */
export class SyncAnswers {
  private readonly waiting = new Map<string, Waiting>();

  /**
   * Waits for `callId`'s answer. `withdraw` stops waiting unless the call was claimed: true when
   * it was not (and now never will be), false when it is being made and its answer is coming.
   */
  expect(
    callId: string,
    trace: TraceContext = untraced,
  ): { answer: Promise<AnswerHere>; claimed: Promise<void>; withdraw(): boolean } {
    let settle = (_: AnswerHere) => {};
    let claimed = () => {};
    const answer = new Promise<AnswerHere>((resolve) => {
      settle = resolve;
    });
    const claim = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    this.waiting.set(callId, { settle, claimed, trace });
    return { answer, claimed: claim, withdraw: () => this.waiting.delete(callId) };
  }

  /** Takes a waited-for call, to make it: its answer goes to `settle`. */
  claim(callId: string): Omit<Waiting, "claimed"> | undefined {
    const waiting = this.waiting.get(callId);
    this.waiting.delete(callId);
    waiting?.claimed();
    return waiting;
  }
}

/**
 * A batch's calls, made here at once, each answered to its listener as it ends: only those a
 * listener of this worker waits for; the others are not made (./sync-calls.ts says why).
 * `makeCalls` makes the claimed ones, an outcome each.
 */
export function callsWaitedHere(
  answers: SyncAnswers | undefined,
  calls: readonly SyncInput[],
  makeCalls: (claimed: ClaimedCall[]) => Promise<SyncOutcome>[],
): Promise<SyncReceipt[]> {
  const waiting = calls.map((call) => answers?.claim(syncWorkflowId(call)));
  const made = madeForSome(
    calls.map((call, i) => ({ call, trace: waiting[i]?.trace ?? untraced })),
    waiting,
    makeCalls,
    () => undefined,
  );
  return Promise.all(
    waiting.map(async (claimed, i): Promise<SyncReceipt> => {
      if (!claimed) return "not waited for here";
      try {
        const outcome = made[i];
        if (!outcome) throw new Error("no outcome for a claimed call");
        claimed.settle({ outcome: await outcome });
        return "answered";
      } catch (error) {
        claimed.settle({ failed: error });
        return "failed";
      }
    }),
  );
}

/**
 * `make`'s answers for the items `chosen` marks (all at once, in order), `otherwise` for the
 * rest: each item's answer at its own index.
 */
export function madeForSome<Item, Answer>(
  items: readonly Item[],
  chosen: readonly unknown[],
  make: (chosen: Item[]) => Answer[],
  otherwise: (item: Item) => Answer,
): Answer[] {
  const made = make(items.filter((_, i) => chosen[i]));
  let next = 0;
  return items.map((item, i) => (chosen[i] ? (made[next++] as Answer) : otherwise(item)));
}
