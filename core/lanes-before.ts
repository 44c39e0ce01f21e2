/**
 * Ordered delivery as releases before lanes in Postgres (store/lanes.ts) ran it, kept so that
 * requests and lanes begun then finish on today's workers (workflows/lanes-before.ts): a lane
 * workflow per key kept its queue in its state. Remove once no such workflow runs.
 */
/**
 * A lane's state, carried across its continue-as-new: per target id, the request ids waiting in
 * join order (the first is the head), and the targets whose head has been let go.
 */
export interface LaneState {
  queues: Record<string, string[]>;
  going: string[];
}

export const emptyLane = (): LaneState => ({ queues: {}, going: [] });

/** A request joins each of its targets' queues, once: a second join (a retried one) is no-op. */
export function joinLane(state: LaneState, requestId: string, targetIds: string[]): LaneState {
  const queues = { ...state.queues };
  for (const targetId of targetIds) {
    const queue = queues[targetId] ?? [];
    if (!queue.includes(requestId)) queues[targetId] = [...queue, requestId];
  }
  return { ...state, queues };
}

/** A request is done with a target (delivered, failed for good, cancelled, or gone). */
export function leaveLane(state: LaneState, requestId: string, targetId: string): LaneState {
  const queue = state.queues[targetId];
  if (!queue?.includes(requestId)) return state;
  const queues = { ...state.queues };
  const left = queue.filter((id) => id !== requestId);
  if (left.length > 0) queues[targetId] = left;
  else delete queues[targetId];
  const wasHead = queue[0] === requestId;
  const going = wasHead ? state.going.filter((id) => id !== targetId) : state.going;
  return { queues, going };
}

/** The heads to let go now (a target with none going), and the state once they go. */
export function nextToGo(state: LaneState): {
  go: { targetId: string; requestId: string }[];
  state: LaneState;
} {
  const go = Object.entries(state.queues).flatMap(([targetId, [head]]) =>
    head !== undefined && !state.going.includes(targetId) ? [{ targetId, requestId: head }] : [],
  );
  return { go, state: { ...state, going: [...state.going, ...go.map((g) => g.targetId)] } };
}

/** The heads let go and not yet done: the requests whose workflows the lane checks still run. */
export function headsGoing(state: LaneState): { targetId: string; requestId: string }[] {
  return state.going.flatMap((targetId) => {
    const head = state.queues[targetId]?.[0];
    return head === undefined ? [] : [{ targetId, requestId: head }];
  });
}

/** Requests waiting in the lane, heads included, over all its targets. */
export function laneSize(state: LaneState): number {
  return Object.values(state.queues).reduce((n, queue) => n + queue.length, 0);
}

/** The lane's workflow type and its signals (workflows/lanes.ts). */
export const LANE_WORKFLOW = "orderedLane";
/** To the lane: a request joins (`LaneJoin`), or is done with a target (`LaneDone`). */
export const LANE_JOIN_SIGNAL = "join";
export const LANE_DONE_SIGNAL = "done";
export interface LaneJoin {
  requestId: string;
  targetIds: string[];
}

export interface LaneDone {
  requestId: string;
  targetId: string;
}

/** A lane's input: its project (fairness), and what a run before it carried over. */
export interface LaneInput {
  project: string;
  carried?: LaneState;
}
