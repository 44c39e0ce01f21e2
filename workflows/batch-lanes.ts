/**
 * A batch's ordered requests, attempted in their lanes' turns inside its local activities
 * (./batch-attempts.ts): their claims in one transaction, parked under the batch's workflow id
 * where it is not their turn; each round attempts those whose turn it is at every target asked,
 * and one transaction passes on the turns their ended series leave. A turn that passes to another
 * request of the batch is kept and attempted in the next round, with no signal and no workflow
 * task, so a contended key's calls in one batch go one after another in one activity. A request
 * left waiting waits in the batch for its turn's signal (./batch-holds.ts).
 */
import type { LaneClaim, Leaving, Turn, TurnGiven } from "../store/lanes.ts";
import { type FirstAttempt, goesOn, type InLane } from "./deliveries.ts";

export interface LaneDeps {
  /** Claims, in one transaction; those not in turn park under `carrier`, counted as waiting. */
  claim(claims: LaneClaim[], carrier: string): Promise<Record<string, Turn>[]>;
  /** Leaves, in one transaction; turns given that `keep` keeps are answered, not told. */
  leave(leaving: Leaving[], keep: (given: TurnGiven) => boolean): Promise<TurnGiven[]>;
  /** These requests no longer wait in their lanes: their turn came. */
  stopWaiting(waits: { requestId: string; laneId: string }[]): Promise<void>;
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

export async function attemptInTurns<T extends LaneItem>(
  lanes: LaneDeps,
  carrier: string,
  items: T[],
  attempt: (item: T) => Promise<(FirstAttempt | null)[]>,
): Promise<((FirstAttempt | null)[] | InLane)[]> {
  const deadline = performance.now() + CHAIN_MS;
  const claimed = await lanes.claim(
    items.map(({ laneId, requestId, targetIds }) => ({ laneId, requestId, targetIds })),
    carrier,
  );
  const turns = items.map(
    (item, i) => new Set(item.targetIds.filter((id) => claimed[i]?.[id] === "turn")),
  );
  const waited = items.map((item, i) => item.waited || turns[i]?.size !== item.targetIds.length);
  const outcomes: ((FirstAttempt | null)[] | undefined)[] = items.map(() => undefined);
  const inTurn = (i: number) => turns[i]?.size === items[i]?.targetIds.length;
  const byRequest = new Map(items.map((item, i) => [item.requestId, i]));
  const mine = (given: TurnGiven) => given.workflowId === carrier && byRequest.has(given.requestId);
  for (let round = 0; round === 0 || performance.now() < deadline; round++) {
    const now = items.flatMap((_, i) => (outcomes[i] === undefined && inTurn(i) ? [i] : []));
    if (now.length === 0) break;
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
    if (leaving.length === 0) break;
    for (const given of await lanes.leave(leaving, mine)) {
      turns[byRequest.get(given.requestId) as number]?.add(given.targetId);
    }
  }
  const attemptedAfterWaiting = items.filter((_, i) => waited[i] && outcomes[i] !== undefined);
  if (attemptedAfterWaiting.length > 0) await lanes.stopWaiting(attemptedAfterWaiting);
  return items.map((_, i) => outcomes[i] ?? (inTurn(i) ? "ready" : "waits"));
}
