/**
 * Flow control at an attempt (core/flow.ts): a limited target's room for one more, taken before
 * the call, as the attempt's activity waits for it.
 */
import { FLOW_HORIZON_MS, flowLimitsOf } from "../core/flow.ts";
import type { Release } from "../core/project-slots.ts";
import { bookStart, takePlace } from "../store/flow.ts";
import type { AttemptDeps } from "./activity-deps.ts";
import type { TakeSlot } from "./batch-attempts.ts";
import type { DeliverInput } from "./deliveries.ts";

/** Why an attempt was not made: its limited target had no room, or its project's share none. */
export type NoRoom = "no room" | "busy";

/**
 * Room for this delivery's attempt: a slot of its project's share of the worker (`takeSlot`) and,
 * at a limited target (core/flow.ts), a start at its pace booked and waited for (at most the
 * horizon), then a place among its attempts in flight. The slot is taken after the wait for the
 * start, so deliveries waiting for theirs hold none of the worker. One that finds the places all
 * taken at its start books a later start rather than go late: gone whenever a place freed,
 * deliveries waiting for places would start together, more than the pace in one second. A
 * delivery its drain let go tries so within the horizon before it waits held again.
 */
export async function roomForAttempt(
  deps: AttemptDeps,
  delivery: DeliverInput,
  takeSlot: TakeSlot,
): Promise<Release | NoRoom> {
  const limits = flowLimitsOf(delivery.target);
  if (!limits) return (await takeSlot()) ?? "busy";
  const { target, requestId } = delivery;
  const fromQueue = delivery.fromQueue === true;
  const until = performance.now() + (fromQueue ? FLOW_HORIZON_MS : 0);
  for (;;) {
    const waitMs = await bookStart(deps.sql, target.id, limits, requestId, fromQueue);
    if (waitMs === null) return "no room";
    if (waitMs > 0) await sleepFor(waitMs);
    const release = await takeSlot();
    if (!release) return "busy";
    if (await takePlace(deps.sql, target, limits, requestId)) return release;
    release();
    if (performance.now() > until) return "no room";
    // Unpaced, a start is always now: look again a little later.
    if (limits.perSecond === null) await sleepFor(LOOK_AGAIN_MS);
  }
}

/** How soon a delivery let go to an unpaced target looks again for a place. */
const LOOK_AGAIN_MS = 50;

const sleepFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
