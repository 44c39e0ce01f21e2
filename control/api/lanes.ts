/**
 * An edge's joins of ordering lanes (store/lanes.ts): an ordered call takes its place before its
 * workflow's start and its 202; one whose start then failed leaves, and the next request there is
 * told its turn came.
 */
import { RelayError } from "../../core/errors.ts";
import type { LanePlace } from "../../core/lanes.ts";
import { signalTurns } from "../../platform/temporal.ts";
import { forgetPlace, joinLane, passTurns } from "../../store/lanes.ts";
import { requireEdge } from "../auth.ts";
import type { Ctx } from "./context.ts";

/** An endpoint's targets at most (control/api/routing.ts), and an id's length at most. */
const MAX_TARGETS = 50;
const MAX_ID = 256;
const LANE_ID = /^lane:([^:]+):[0-9a-f]{32}$/;

/** A place an edge names: a lane of its project, a request, and 1 to 50 distinct targets. */
export function checkPlace(place: LanePlace): void {
  const { project, laneId, requestId, targetIds } = place;
  if (LANE_ID.exec(laneId)?.[1] !== project) {
    throw new RelayError("bad_request", "a lane id names its project (core/lanes.ts)");
  }
  const badId = (id: string) => id.length === 0 || id.length > MAX_ID;
  if (badId(requestId) || targetIds.length === 0 || targetIds.length > MAX_TARGETS) {
    throw new RelayError("bad_request", "a lane's place needs a request id and 1 to 50 targets");
  }
  if (targetIds.some(badId) || new Set(targetIds).size < targetIds.length) {
    throw new RelayError("bad_request", "a lane's place names each target once");
  }
}

/** Joins at the back of the lane; false when the request was there already. */
export async function joinOrderingLane(ctx: Ctx, place: LanePlace): Promise<boolean> {
  requireEdge(ctx.caller);
  checkPlace(place);
  return ctx.sql.begin((tx) => joinLane(tx, place.laneId, place.requestId, place.targetIds));
}

/**
 * Gives an unstarted call's place back: it leaves, the parked requests given the turn are told
 * (ones gone are passed over), and its entries are forgotten, so the call sent again with its
 * Idempotency-Key (the same request id) joins anew, at the back, even when the telling failed.
 */
export async function leaveOrderingLane(ctx: Ctx, place: LanePlace): Promise<void> {
  requireEdge(ctx.caller);
  checkPlace(place);
  try {
    await passTurns(ctx.sql, [place], async (given) =>
      given.length === 0 ? [] : signalTurns(await ctx.temporal(), given),
    );
  } finally {
    // Left, though its turn's signal failed (owed: control/lane-sweep.ts tells it), or not left.
    await forgetPlace(ctx.sql, place);
  }
}
