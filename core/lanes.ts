/**
 * Ordered delivery (an endpoint's `ordering: "fifo"`): a lane is one endpoint's ordering key; per
 * async target it keeps the requests in the order they joined it and lets one at a time deliver.
 * The lane's queue is in Postgres (store/lanes.ts); a request's workflow waits for its turn there
 * (workflows/lanes.ts); the edge names the lane, checks the key, and joins before its 202.
 */
import type { IdDigest } from "./id-digest.ts";

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

/** Where a delivery of an ordered endpoint queues: its lane's id and its key. */
export interface LaneRef {
  laneId: string;
  key: string;
  /**
   * Its edge joined the lane before the 202 (an immediate call), before its workflow's start. A
   * delayed call, or a replay, joins from its workflow.
   */
  joinedAtEdge?: boolean;
}

/**
 * A lane's id: the project in clear (an operator reading `lane_entries` sees whose), the
 * endpoint and key `digest`ed (core/id-digest.ts, 32 hex characters), so any key makes a short,
 * safe id.
 */
export async function laneIdOf(
  project: string,
  endpoint: { line: string; path: string },
  key: string,
  digest: IdDigest,
): Promise<string> {
  const text = new TextEncoder().encode(`${endpoint.line}/${endpoint.path}\n${key}`);
  const hex = [...(await digest(text))].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `lane:${project}:${hex.slice(0, 32)}`;
}

/** To a request's workflow: its turn has come at a target (`{ targetId }`, store/lanes.ts). */
export const LANE_GO_SIGNAL = "go";

/** A request's place in its lane: an entry per async target, in order. */
export interface LanePlace {
  project: string;
  laneId: string;
  requestId: string;
  targetIds: string[];
}
