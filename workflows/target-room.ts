/**
 * Flow control at an attempt (core/flow.ts): a limited target's room for one more, taken before
 * the call, as the attempt's activity waits for it.
 */
import { FLOW_HORIZON_MS, flowLimitsOf } from "../core/flow.ts";
import { bookStart, takePlace } from "../store/flow.ts";
import type { AttemptDeps } from "./activity-deps.ts";
import type { DeliverInput } from "./deliveries.ts";

/**
 * Whether a limited target has room for this delivery now (core/flow.ts): a start at its pace
 * booked and waited for (at most the horizon), then a place among its attempts in flight. A
 * delivery its drain let go, finding them all taken, looks again a few times within the horizon
 * before it waits held again: an attempt at a target answering in milliseconds frees one that
 * soon. A target without limits always has room.
 */
export async function roomAtTarget(deps: AttemptDeps, delivery: DeliverInput): Promise<boolean> {
  const limits = flowLimitsOf(delivery.target);
  if (!limits) return true;
  const { target, requestId } = delivery;
  const fromQueue = delivery.fromQueue === true;
  const waitMs = await bookStart(deps.sql, target.id, limits, requestId, fromQueue);
  if (waitMs === null) return false;
  if (waitMs > 0) await sleepFor(waitMs);
  const until = performance.now() + (fromQueue ? FLOW_HORIZON_MS : 0);
  while (!(await takePlace(deps.sql, target, limits, requestId))) {
    if (performance.now() + LOOK_AGAIN_MS > until) return false;
    await sleepFor(LOOK_AGAIN_MS);
  }
  return true;
}

/** How soon a delivery let go looks again for room at its limited target. */
const LOOK_AGAIN_MS = 50;

const sleepFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
