/**
 * A batch's ordered requests, attempted in their lanes' turns inside its local activities
 * (./batch-attempts.ts): their claims in one transaction, parked under the batch's workflow id
 * where it is not their turn; each round attempts those whose turn it is at every target asked,
 * and one transaction passes on the turns their ended series leave. A turn that passes to another
 * request of the batch is kept and attempted in the next round, with no signal and no workflow
 * task, so a contended key's calls in one batch go one after another in one activity. When none
 * is in turn, the activity listens a while for turns given on this worker to its waiting ones
 * (./turn-hand-offs.ts), so a key's calls in two batches side by side pass the turn without a
 * signal too. A request left waiting waits in the batch for its turn's signal (./batch-holds.ts).
 */
import type { Release } from "../core/project-slots.ts";
import type { LaneClaim, Leaving, Turn, TurnGiven } from "../store/lanes.ts";
import { type FirstAttempt, goesOn, type InLane } from "./deliveries.ts";
import type { TurnInbox } from "./turn-hand-offs.ts";

export interface LaneDeps {
  /** Listens for turns handed over on this worker to these entries parked under `carrier`. */
  listen(carrier: string, claims: LaneClaim[]): TurnInbox;
  /**
   * A slot of the project's share of this worker's long listeners (each holds a local activity
   * slot while it waits), or null: it listens no longer than HAND_OFF_WAIT_MS.
   */
  listenLonger(): Release | null;
  /** Claims, in one transaction; those not in turn park under `carrier`. */
  claim(claims: LaneClaim[], carrier: string): Promise<Record<string, Turn>[]>;
  /** Leaves, in one transaction; turns given that `keep` keeps are answered, not told. */
  leave(leaving: Leaving[], keep: (given: TurnGiven) => boolean): Promise<TurnGiven[]>;
  /**
   * These requests wait in their lanes past this activity (`entered`, counted among their
   * project's waiting deliveries), these no longer do (`left`: their turn came), in one change.
   */
  countWaits(entered: LaneWait[], left: LaneWait[]): Promise<void>;
}

/** An ordered request waiting in its lane. */
export interface LaneWait {
  requestId: string;
  laneId: string;
}

/** An ordered request of the batch and the targets it is attempted at now. */
export interface LaneItem {
  requestId: string;
  laneId: string;
  targetIds: string[];
  /** It waited for its turn in the batch before (counted among its project's waiting). */
  waited: boolean;
}

/**
 * How long an activity goes on with turns it passed to its own requests: past this the rest go
 * in the batch's next activity, so its timeout (the slowest target's, and slack) holds.
 */
const CHAIN_MS = 5_000;
/**
 * How long the activity listens at a time for a turn handed over when none of its requests is in
 * turn, holding no slot of its project's long listeners: a busy worker's activity before it in
 * the lane, whose leave likely gives the turn, lasts up to about this. With such a slot (a batch
 * of ordered requests only, ./batch-attempts.ts) it listens until CHAIN_MS: a contended key's
 * backlog spans more batches than run at once, and a turn that finds its batch's activity gone
 * costs a signal, a workflow task and an activity. The batch's attempted requests wait
 * meanwhile, their local activity slot held.
 */
const HAND_OFF_WAIT_MS = 1000;

export async function attemptInTurns<T extends LaneItem>(
  lanes: LaneDeps,
  carrier: string,
  items: T[],
  attempt: (item: T) => Promise<(FirstAttempt | null)[]>,
): Promise<((FirstAttempt | null)[] | InLane)[]> {
  const deadline = performance.now() + CHAIN_MS;
  const claims = items.map(({ laneId, requestId, targetIds }) => ({
    laneId,
    requestId,
    targetIds,
  }));
  // Listening before the claim: a turn given once it commits is handed here, not signalled.
  const inbox = lanes.listen(carrier, claims);
  let listensLonger: Release | null | undefined;
  try {
    const claimed = await lanes.claim(claims, carrier);
    const turns = items.map(
      (item, i) => new Set(item.targetIds.filter((id) => claimed[i]?.[id] === "turn")),
    );
    const outcomes: ((FirstAttempt | null)[] | undefined)[] = items.map(() => undefined);
    const inTurn = (i: number) => turns[i]?.size === items[i]?.targetIds.length;
    const byRequest = new Map(items.map((item, i) => [item.requestId, i]));
    const hear = (given: TurnGiven[]) => {
      for (const g of given) turns[byRequest.get(g.requestId) as number]?.add(g.targetId);
    };
    const mine = (given: TurnGiven) =>
      given.workflowId === carrier && byRequest.has(given.requestId);
    const inTurnNow = () => {
      hear(inbox.take());
      return items.flatMap((_, i) => (outcomes[i] === undefined && inTurn(i) ? [i] : []));
    };
    for (let round = 0; round === 0 || performance.now() < deadline; round++) {
      let now = inTurnNow();
      if (now.length === 0) {
        const left = deadline - performance.now();
        if (left <= 0 || outcomes.every((o) => o !== undefined)) break;
        listensLonger ??= lanes.listenLonger();
        hear(await inbox.next(listensLonger ? left : Math.min(HAND_OFF_WAIT_MS, left)));
        now = inTurnNow();
        if (now.length === 0) break;
      }
      const verdicts = await Promise.all(now.map((i) => attempt(items[i] as T)));
      const leaving: Leaving[] = [];
      now.forEach((i, k) => {
        const item = items[i] as T;
        outcomes[i] = verdicts[k];
        // A series that ended passes its turn on; one going on (a retry) keeps it.
        const ended = item.targetIds.filter((_, j) => !goesOn(verdicts[k]?.[j]));
        if (ended.length > 0)
          leaving.push({ laneId: item.laneId, requestId: item.requestId, targetIds: ended });
      });
      if (leaving.length > 0) hear(await lanes.leave(leaving, mine));
    }
    // A turn handed over too late to go is answered as ready: the batch attempts it next.
    hear(inbox.close());
    // Counted only once it waits past the activity: one handed its turn here never is.
    const entered = items.filter((item, i) => !item.waited && outcomes[i] === undefined);
    const left = items.filter((item, i) => item.waited && outcomes[i] !== undefined);
    if (entered.length + left.length > 0) await lanes.countWaits(entered, left);
    return items.map((_, i) => outcomes[i] ?? (inTurn(i) ? "ready" : "waits"));
  } finally {
    // Thrown: a turn handed over is in its lane's row still, found by the request's next claim.
    inbox.close();
    listensLonger?.();
  }
}
