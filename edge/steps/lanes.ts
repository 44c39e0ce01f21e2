/**
 * An immediate ordered call's place in its lane (core/lanes.ts), taken through the control plane
 * before its workflow starts, so the lane's order is the accept order.
 */
import type { DeliveryInput } from "../../core/delivery.ts";
import { notQueued } from "../../core/errors.ts";
import type { LanePlace } from "../../core/lanes.ts";
import type { EdgeDeps } from "../deps.ts";

/** Takes the call's place at the back of its lane: false when it had one already. */
export async function joinLane(deps: EdgeDeps, place: LanePlace): Promise<boolean> {
  return deps.joinLane(place).catch((err: unknown) => {
    deps.logError({ err, requestId: place.requestId }, "an ordering lane could not be joined");
    throw notQueued();
  });
}

/**
 * An immediate ordered call takes its place in its lane before its start, so the lane's order is
 * the accept order; one that then does not start leaves it (best effort: a place whose workflow
 * never runs is found by the control plane's sweep of lanes). Any other call just starts.
 */
export async function inLane<T>(
  deps: EdgeDeps,
  input: DeliveryInput,
  start: () => Promise<T>,
  /** Joined before (as its batch's acceptance went unanswered): whether anew. */
  joinedBefore?: boolean,
): Promise<T> {
  const { ordering } = input;
  if (!ordering?.joinedAtEdge) return start();
  const place = {
    project: input.project,
    laneId: ordering.laneId,
    requestId: input.requestId,
    targetIds: input.targets.map((t) => t.id),
  };
  const joined = joinedBefore ?? (await joinLane(deps, place));
  try {
    return await start();
  } catch (error) {
    if (joined) await deps.leaveLane(place).catch(() => {});
    throw error;
  }
}
