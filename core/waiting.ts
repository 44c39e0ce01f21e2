/**
 * The cap on a project's waiting deliveries: delayed calls not yet due and deliveries held for a
 * paused or failing target. Each waits durably at no cost to its project until it goes, so
 * without a cap one project could fill the store and every worker's queue (docs/security.md
 * "Limits"). Each plan has a default an operator can raise (RELAY_MAX_WAITING_DELIVERIES_*), and
 * one project a cap of its own.
 */
import type { Plan } from "./model.ts";

export const defaultWaitingCaps: Record<Plan, number> = { free: 10_000, paid: 100_000 };

/** A project's cap: an operator's own for it, else its plan's. */
export function waitingCap(
  plan: Plan,
  planCaps: Record<Plan, number>,
  projectCap: number | null,
): number {
  return projectCap ?? planCaps[plan];
}

/** Whether `more` waiting deliveries (one by default) stay within the cap beside `waiting`. */
export function roomFor(waiting: number, cap: number, more = 1): boolean {
  return waiting + more <= cap;
}

/**
 * Which of several calls, each wanting one place, take one in order while the cap allows, with
 * `waiting` taken already; a repeat (`repeated`) keeps the place it has and takes no other.
 */
export function admittedInOrder(
  waiting: number,
  cap: number,
  repeated: readonly boolean[],
): boolean[] {
  let taken = waiting;
  return repeated.map((repeat) => {
    if (repeat) return true;
    if (!roomFor(taken, cap)) return false;
    taken++;
    return true;
  });
}

/**
 * How long a place taken for a call to a held target (`heldPlaces`) lasts when no worker turns it
 * into the held delivery itself, nor a release gives it back: longer than any worker's way to
 * it, short enough that one lost to a failed start does not fill the cap for long.
 */
export const HELD_PLACE_MS = 10 * 60_000;

/**
 * The targets of an immediate, unordered call that take a place under the cap as it is accepted:
 * its async ones whose deliveries are held now (paused, their circuit open), since it will wait
 * for them. A delayed call's place is its time's; an ordered one's, its lane's.
 */
export function heldPlaces(
  targets: readonly { id: string; deliveryMode: string }[],
  heldTargetIds: ReadonlySet<string>,
): string[] {
  return targets
    .filter((t) => t.deliveryMode === "async" && heldTargetIds.has(t.id))
    .map((t) => t.id);
}

/** What a call refused at the cap is told (409 `limit_exceeded`). */
export function waitingCapMessage(cap: number): string {
  return `this project has reached its cap of ${cap} scheduled and held deliveries (maxWaitingDeliveries): cancel scheduled calls or resume held targets, or ask for a higher cap`;
}
