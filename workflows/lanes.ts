/**
 * Ordered delivery (core/lanes.ts), a request's side: its lane's queue is in Postgres
 * (store/lanes.ts), so the workflow holds no queue and a key of any length drains with bounded
 * memory. The request claims its turn at each async target as it starts (its edge joined it before
 * the 202; a delayed call or a replay joins then), waits for the signal of a turn it did not get,
 * runs each target's series in its turn, and passes the turn on when that series ends: the next
 * request parked there is signalled, or, its workflow gone, passed over in turn.
 */
import {
  CancellationScope,
  condition,
  patched,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from "@temporalio/workflow";
import type { DeliveryInput } from "../core/delivery.ts";
import type { LaneRef } from "../core/lanes.ts";
import type { Activities } from "./activities.ts";
import { LaneBefore } from "./lanes-before.ts";
import { goSignal } from "./signals.ts";

const bookkeeping = { startToCloseTimeout: "10 seconds", retry: { maximumInterval: "1 minute" } };
/** In the task that reaches them: no trip through the task queue. */
const { enterLane, leaveLane, laneWait } = proxyLocalActivities<Activities>(bookkeeping);

/** Requests begun before lanes in Postgres go through their lane's workflow (./lanes-before.ts). */
const LANES_IN_POSTGRES = "lanes-in-postgres";

/** What a request's workflow asks of its lane, whichever kind. */
export type Lane = Pick<RequestLane, "inTurn" | "leaveAll">;

/**
 * A request's place in its lane: created at the workflow's start, so a turn signalled before the
 * request looks for it is kept. Each target's series runs in its turn and passes the turn on.
 */
export class RequestLane {
  private readonly turns = new Set<string>();
  private readonly finished = new Set<string>();

  constructor(
    private readonly lane: LaneRef,
    private readonly project: string,
    /** Its edge joined the lane before the 202 (an immediate call, started by the edge). */
    private readonly edgeJoined: boolean,
  ) {
    setHandler(goSignal, ({ targetId }) => {
      this.turns.add(targetId);
    });
  }

  /** An ordered request's lane; one begun before lanes in Postgres keeps its lane's workflow. */
  static of(input: DeliveryInput): Lane | null {
    const { ordering } = input;
    if (!ordering) return null;
    const edgeJoined = ordering.joinedAtEdge === true;
    return patched(LANES_IN_POSTGRES)
      ? new RequestLane(ordering, input.project, edgeJoined)
      : new LaneBefore(ordering, input.project, edgeJoined);
  }

  /**
   * Joins (a delayed call at its time, a replay at its start) and claims its turns, then runs each
   * target's series in its turn. `series` answers once the target's attempts end; how long the
   * turn was waited for is passed.
   */
  async inTurn<T extends { target: { id: string } }>(
    deliveries: T[],
    series: (delivery: T, waitedMs: number) => Promise<void>,
  ): Promise<void> {
    const requestId = workflowInfo().workflowId;
    // Counted among its project's waiting deliveries until its end (store/waiting.ts).
    const wait = { requestId, project: this.project, laneId: this.lane.laneId };
    const targetIds = deliveries.map((d) => d.target.id);
    const claimed = await enterLane(wait, targetIds, !this.edgeJoined);
    for (const targetId of targetIds) if (claimed[targetId] === "turn") this.turns.add(targetId);
    await Promise.allSettled(
      deliveries.map(async (delivery) => {
        const targetId = delivery.target.id;
        const since = Date.now();
        await condition(() => this.turns.has(targetId));
        try {
          await series(delivery, Date.now() - since);
        } finally {
          // A cancel's own scope passes the turns on (leaveAll), outside the cancelled one.
          if (!CancellationScope.current().consideredCancelled) await this.passOn([targetId]);
        }
      }),
    );
    await laneWait(wait, false); // a cancel's leaves with its log's cancel (store/waiting.ts)
  }

  /** A cancelled request leaves its lane at every target not yet done. */
  async leaveAll(targetIds: string[]): Promise<void> {
    await this.passOn(targetIds.filter((id) => !this.finished.has(id)));
  }

  /** Leaves the lane at these targets; the requests given the turn there are told (./activities.ts). */
  private async passOn(targetIds: string[]): Promise<void> {
    for (const id of targetIds) this.finished.add(id);
    if (targetIds.length > 0) {
      await leaveLane(this.lane.laneId, workflowInfo().workflowId, targetIds);
    }
  }
}
