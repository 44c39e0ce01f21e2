/**
 * The sweep of waiting deliveries: the places calls to held targets took that no worker turned
 * into a held delivery lapse (store/waiting.ts), and the deliveries still held for a target
 * deleted since (its endpoint or line with it) are let go by its circuit workflow, woken here,
 * so they end as cancelled within seconds of the deletion rather than at their hourly look.
 */
import type { Client } from "@temporalio/client";
import { wakeCircuit } from "../platform/temporal.ts";
import type { Sql } from "../store/db.ts";
import { goneTargetsHolding } from "../store/held.ts";
import { lapsePlaces, type PlanCaps } from "../store/waiting.ts";
import { startSweep } from "./sweeps.ts";

export interface WaitingSweepOptions {
  sql: Sql;
  temporal: () => Promise<Client>;
  waitingCaps: PlanCaps;
  now: () => Date;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/** How often the sweep looks. */
const SWEEP_EVERY_MS = 10_000;
/** Deleted targets one sweep wakes at most; the rest wait for the next. */
const SWEEP_TARGETS = 64;

/** One sweep; answers how many places lapsed and how many deleted targets' circuits it woke. */
export async function sweepWaiting(options: WaitingSweepOptions) {
  const lapsed = await lapsePlaces(options.sql, options.now(), options.waitingCaps);
  const gone = await goneTargetsHolding(options.sql, SWEEP_TARGETS);
  if (gone.length > 0) {
    const client = await options.temporal();
    await Promise.all(gone.map((targetId) => wakeCircuit(client, targetId)));
  }
  return { lapsed, woken: gone.length };
}

/** Sweeps every SWEEP_EVERY_MS until stopped (./sweeps.ts). */
export function startWaitingSweep(options: WaitingSweepOptions): { stop(): void } {
  return startSweep(
    SWEEP_EVERY_MS,
    () => sweepWaiting(options),
    (err) => options.logError({ err }, "the sweep of waiting deliveries failed"),
  );
}
