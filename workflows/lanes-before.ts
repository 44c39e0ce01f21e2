/**
 * Ordered delivery as releases before lanes in Postgres ran it (core/lanes-before.ts), kept so
 * requests and lanes begun then finish on today's workers; new requests take ./lanes.ts (Temporal's
 * patching tells them apart). Remove once no such workflow runs. Both sides of it:
 * - orderedLane: one workflow per (endpoint, ordering key) while deliveries wait in it (workflow
 *   id from laneWorkflowId). Per async target it queues the requests in the order their joins
 *   came (the edge's, before the 202, so accept order) and lets one at a time go with `go`; a
 *   request done with a target (`done`) lets the next one go. A request whose workflow is gone
 *   (the signal fails, or a check finds it closed) is dropped. It ends once empty and idle.
 * - LaneBefore: a request's workflow's side: it joins, waits for each target's turn, and tells
 *   the lane when that target's series of attempts ends.
 */
import {
  CancellationScope,
  condition,
  continueAsNew,
  defineSignal,
  getExternalWorkflowHandle,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  workflowInfo,
} from "@temporalio/workflow";
import type { LaneRef } from "../core/lanes.ts";
import {
  emptyLane,
  headsGoing,
  joinLane,
  LANE_DONE_SIGNAL,
  LANE_JOIN_SIGNAL,
  type LaneDone,
  type LaneInput,
  type LaneJoin,
  type LaneState,
  laneSize,
  leaveLane,
  nextToGo,
} from "../core/lanes-before.ts";
import type { Activities } from "./activities.ts";
import { goSignal } from "./signals.ts";

export const joinSignal = defineSignal<[LaneJoin]>(LANE_JOIN_SIGNAL);
export const doneSignal = defineSignal<[LaneDone]>(LANE_DONE_SIGNAL);

const bookkeeping = { startToCloseTimeout: "10 seconds", retry: { maximumInterval: "1 minute" } };
/** The request's own join: in the task that reaches it, no trip through the task queue. */
const { joinOrderingLane, laneWait } = proxyLocalActivities<Activities>(bookkeeping);
const { runningWorkflows } = proxyActivities<Activities>(bookkeeping);

/** An empty lane idle this long ends; a join after that starts a new run. */
const IDLE_END = "1 minute";
/** How often a lane checks that the requests it let go still run (one terminated by hand). */
const HEAD_CHECK = "10 minutes";
/** How long a request the edge joined waits for its first turn before it joins itself. */
const EDGE_JOIN_GRACE = "1 minute";
/** Events per run before the lane starts afresh, when Temporal has not suggested it sooner. */
const EVENTS_PER_RUN = 10_000;

export async function orderedLane({ project, carried }: LaneInput): Promise<void> {
  let state = carried ?? emptyLane();
  let changes = 0;
  setHandler(joinSignal, ({ requestId, targetIds }) => {
    state = joinLane(state, requestId, targetIds);
    changes++;
  });
  setHandler(doneSignal, ({ requestId, targetId }) => {
    state = leaveLane(state, requestId, targetId);
    changes++;
  });
  void checkHeads(
    () => state,
    (requestId, targetId) => {
      state = leaveLane(state, requestId, targetId);
      changes++;
    },
  );
  for (;;) {
    const seen = changes;
    const next = nextToGo(state);
    state = next.state;
    for (const { targetId, requestId } of next.go) {
      await getExternalWorkflowHandle(requestId)
        .signal(goSignal, { targetId })
        .catch(() => {
          // Its workflow is gone (not found, closed): the next one goes.
          state = leaveLane(state, requestId, targetId);
          changes++;
        });
    }
    if (changes !== seen) continue;
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength > EVENTS_PER_RUN) {
      await continueAsNew<typeof orderedLane>({ project, carried: state });
    }
    if (laneSize(state) === 0) {
      if (!(await condition(() => changes !== seen, IDLE_END))) return;
      continue;
    }
    // No timer per wait (a timer started and cancelled per signal): the check has its own loop.
    await condition(() => changes !== seen);
  }
}

/** Every HEAD_CHECK, drops the heads let go whose workflows no longer run. */
async function checkHeads(
  lane: () => LaneState,
  drop: (requestId: string, targetId: string) => void,
) {
  for (;;) {
    await sleep(HEAD_CHECK);
    const heads = headsGoing(lane());
    if (heads.length === 0) continue;
    const running = new Set(await runningWorkflows(heads.map((h) => h.requestId)));
    for (const head of heads) if (!running.has(head.requestId)) drop(head.requestId, head.targetId);
  }
}

/**
 * A request's place in its lane's workflow: created at the workflow's start (the lane may say
 * `go` before the request looks for it). Each target's series runs in its turn, ends with `done`.
 */
export class LaneBefore {
  private readonly turns = new Set<string>();
  private readonly finished = new Set<string>();

  constructor(
    private readonly lane: LaneRef,
    private readonly project: string,
    /** Its edge joined the lane before the 202 (an immediate call, started by the edge). */
    private readonly edgeJoined: boolean,
  ) {
    setHandler(goSignal, ({ targetId }) => {
      // A turn for a target already done (a late join queued it again): let the next one go.
      if (this.finished.has(targetId)) void this.tellDone(targetId);
      else this.turns.add(targetId);
    });
  }

  /**
   * Joins (a delayed call at its time, a replay at its start; one the edge joined only if no turn
   * came in time), then runs each target's series in its turn.
   * `series` answers once the target's attempts end; how long the turn was waited for is passed.
   */
  async inTurn<T extends { target: { id: string } }>(
    deliveries: T[],
    series: (delivery: T, waitedMs: number) => Promise<void>,
  ): Promise<void> {
    const requestId = workflowInfo().workflowId;
    // Counted among its project's waiting deliveries until its end (store/waiting.ts).
    const wait = { requestId, project: this.project, laneId: this.lane.laneId };
    await laneWait(wait, true);
    const join = () =>
      joinOrderingLane(this.lane.laneId, this.project, {
        requestId,
        targetIds: deliveries.map((d) => d.target.id),
      });
    // An immediate call's edge joined before its 202: the request joins itself only when no turn
    // came in time (an edge lost between its start and its join). Any other joins at once.
    if (!this.edgeJoined) await join();
    else {
      void condition(() => this.turns.size > 0, EDGE_JOIN_GRACE).then(async (came) => {
        if (!came) await join();
      });
    }
    await Promise.allSettled(
      deliveries.map(async (delivery) => {
        const targetId = delivery.target.id;
        const since = Date.now();
        await condition(() => this.turns.has(targetId));
        try {
          await series(delivery, Date.now() - since);
        } finally {
          // A cancel's own scope tells the lane (leaveAll), outside the cancelled one.
          if (!CancellationScope.current().consideredCancelled) await this.done(targetId);
        }
      }),
    );
    await laneWait(wait, false); // a cancel's leaves with its log's cancel (store/waiting.ts)
  }

  /** A cancelled request leaves its lane for every target not yet done. */
  async leaveAll(targetIds: string[]): Promise<void> {
    await Promise.all(targetIds.filter((id) => !this.finished.has(id)).map((id) => this.done(id)));
  }

  private async done(targetId: string): Promise<void> {
    this.finished.add(targetId);
    await this.tellDone(targetId);
  }

  private async tellDone(targetId: string): Promise<void> {
    await getExternalWorkflowHandle(this.lane.laneId)
      .signal(doneSignal, { requestId: workflowInfo().workflowId, targetId })
      .catch(() => {}); // a lane that ended holds nothing of this request
  }
}
