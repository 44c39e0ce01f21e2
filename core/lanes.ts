/**
 * Ordered delivery (an endpoint's `ordering: "fifo"`): the rules of a lane, pure. A lane is one
 * endpoint's ordering key; per async target it keeps the requests in the order they joined it and
 * lets one at a time go. The lane's workflow (workflows/lanes.ts) applies these rules to its
 * signals; the edge names the lane and checks the key.
 */

export const orderings = ["none", "fifo"] as const;
export type Ordering = (typeof orderings)[number];

/** The caller's ordering key; absent, the endpoint's one default lane (""). */
export const ORDERING_KEY_HEADER = "relay-ordering-key";
export const MAX_ORDERING_KEY_LENGTH = 128;
/** Visible ASCII (0x21 to 0x7E): no spaces, no control characters. */
const ORDERING_KEY = /^[\x21-\x7e]*$/;

/** Why a key is refused, or null when it is one. */
export function orderingKeyProblem(key: string): string | null {
  if (key.length > MAX_ORDERING_KEY_LENGTH) {
    return `Relay-Ordering-Key is at most ${MAX_ORDERING_KEY_LENGTH} characters`;
  }
  if (!ORDERING_KEY.test(key)) {
    return "Relay-Ordering-Key takes visible ASCII characters only (0x21 to 0x7E)";
  }
  return null;
}

/** Where a delivery of an ordered endpoint queues: its lane's workflow id and its key. */
export interface LaneRef {
  laneId: string;
  key: string;
  /**
   * Its edge joins the lane before the 202 (an immediate call): its workflow then joins itself
   * only if no turn comes in time. A delayed call, or a replay, joins from its workflow.
   */
  joinedAtEdge?: boolean;
}

/**
 * The lane's workflow id: the project in clear (the Temporal UI finds a project's lanes), the
 * endpoint and key hashed (SHA-256, 32 hex characters), so any key makes a short, safe id.
 */
export async function laneWorkflowId(
  project: string,
  endpoint: { line: string; path: string },
  key: string,
): Promise<string> {
  const text = new TextEncoder().encode(`${endpoint.line}/${endpoint.path}\n${key}`);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
  const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `lane:${project}:${hex.slice(0, 32)}`;
}

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
/** To a request's workflow: its turn has come for a target (`{ targetId }`). */
export const LANE_GO_SIGNAL = "go";

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
