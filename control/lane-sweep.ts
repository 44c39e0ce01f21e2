/**
 * The sweep of ordering lanes' heads (store/lanes.ts): a head that has not moved for a while is
 * looked up in Temporal; when the workflow carrying it (its own, or a batch's) no longer runs
 * (terminated by hand, or its edge died between the join and the start), it leaves its lane on
 * its behalf and the next request is given the turn, so no lane waits for good on a request that
 * will never deliver. One whose carrier runs is told its turn again: a signal lost (its sender
 * died between its leave's commit and the signal) would hold the lane as long.
 */
import type { Client } from "@temporalio/client";
import { runningWorkflows, signalTurns } from "../platform/temporal.ts";
import type { Sql } from "../store/db.ts";
import { passTurns, stillHeads } from "../store/lanes.ts";
import { startSweep } from "./sweeps.ts";

export interface LaneSweepOptions {
  sql: Sql;
  temporal: () => Promise<Client>;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/** How long a head stays unchanged before its workflow is looked up (and again after that). */
export const STILL_HEAD_MS = 10 * 60_000;
/** Heads one sweep looks up at most; the rest wait for the next. */
const SWEEP_HEADS = 64;
/** How often the sweep looks. */
const SWEEP_EVERY_MS = 60_000;

/** One sweep; answers how many heads it found gone. */
export async function sweepLaneHeads(options: LaneSweepOptions, stillForMs = STILL_HEAD_MS) {
  const heads = await stillHeads(options.sql, stillForMs, SWEEP_HEADS);
  if (heads.length === 0) return 0;
  const client = await options.temporal();
  const running = new Set(
    await runningWorkflows(client, [...new Set(heads.map((h) => h.workflowId))]),
  );
  const gone = heads.filter((head) => !running.has(head.workflowId));
  // A running one may have missed its turn's signal (told again, harmlessly if not).
  await signalTurns(
    client,
    heads.filter((head) => running.has(head.workflowId)),
  );
  await passTurns(
    options.sql,
    gone.map(({ laneId, requestId, targetId, workflowId }) => ({
      laneId,
      requestId,
      targetIds: [targetId],
      carriedBy: workflowId,
    })),
    (given) => signalTurns(client, given),
  );
  return gone.length;
}

/** Sweeps every SWEEP_EVERY_MS until stopped (./sweeps.ts). */
export function startLaneSweep(options: LaneSweepOptions): { stop(): void } {
  return startSweep(
    SWEEP_EVERY_MS,
    () => sweepLaneHeads(options),
    (err) => options.logError({ err }, "the sweep of lane heads failed"),
  );
}
