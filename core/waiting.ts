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

/** Whether one more waiting delivery stays within the cap beside `waiting` ones. */
export function roomForOneMore(waiting: number, cap: number): boolean {
  return waiting < cap;
}

/** What a call refused at the cap is told (409 `limit_exceeded`). */
export function waitingCapMessage(cap: number): string {
  return `this project has reached its cap of ${cap} scheduled and held deliveries (maxWaitingDeliveries): cancel scheduled calls or resume held targets, or ask for a higher cap`;
}
