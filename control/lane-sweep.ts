/**
 * The sweeps of ordering lanes (store/lanes.ts). A turn given to a parked request is signalled to
 * its carrier after the leave's commit; a sender that died between the two, or a Temporal down
 * meanwhile, left it untold: the turn is owed, and told again within seconds. A head that has not
 * moved for long is looked up too: when the workflow carrying it (its own, or a batch's) no longer
 * runs (terminated by hand, or its edge died between the join and the start), it leaves its lane
 * on its behalf and the next request is given the turn, so no lane waits for good on a request
 * that will never deliver. Either way one whose carrier runs is told again, harmlessly if it knew,
 * and one a batch carries is told in its own workflow too, where the batch may have let it go.
 */
import type { Client } from "@temporalio/client";
import { signalTurns } from "../platform/temporal.ts";
import type { Sql } from "../store/db.ts";
import { owedTurns, passTurns, stillHeads, type TurnGiven, turnsTold } from "../store/lanes.ts";
import { startSweep } from "./sweeps.ts";

export interface LaneSweepOptions {
  sql: Sql;
  temporal: () => Promise<Client>;
  logError: (fields: Record<string, unknown>, message: string) => void;
  /** Turns found owed: each a signal lost (or a series past OWED_TURN_MS). */
  logWarn: (fields: Record<string, unknown>, message: string) => void;
}

/** How long a head stays unchanged before its workflow is looked up (and again after that). */
export const STILL_HEAD_MS = 10 * 60_000;
/**
 * How long a turn given stays unclaimed before it is told again: a batch told claims it in
 * milliseconds, a request's own workflow does not claim but leaves when its series ends, so one
 * whose series runs longer than this is told twice, once.
 */
export const OWED_TURN_MS = 15_000;
/** Heads one sweep looks up at most; the rest wait for the next. */
const SWEEP_HEADS = 64;
/** Owed turns one sweep tells at most (Temporal down a while leaves one per busy lane). */
const SWEEP_OWED = 256;
/** How often each sweep looks. */
const STILL_EVERY_MS = 60_000;
const OWED_EVERY_MS = 5_000;

/**
 * Tells these turns' carriers again; those gone leave their lanes on their behalf, the turns
 * passing on. Answers the turns told.
 */
async function tellAgain(options: LaneSweepOptions, turns: TurnGiven[]): Promise<TurnGiven[]> {
  if (turns.length === 0) return [];
  const client = await options.temporal();
  // A batch told may run on without the request (let go on alone): its own workflow is told too.
  const gone = new Set(await signalTurns(client, turns, { ownToo: true }));
  await passTurns(
    options.sql,
    [...gone].map(({ laneId, requestId, targetId, workflowId }) => ({
      laneId,
      requestId,
      targetIds: [targetId],
      carriedBy: workflowId,
    })),
    (given) => signalTurns(client, given),
  );
  return turns.filter((turn) => !gone.has(turn));
}

/** One sweep of heads still for `stillForMs`; answers how many it found gone. */
export async function sweepLaneHeads(options: LaneSweepOptions, stillForMs = STILL_HEAD_MS) {
  const heads = await stillHeads(options.sql, stillForMs, SWEEP_HEADS);
  return heads.length - (await tellAgain(options, heads)).length;
}

/** One sweep of turns owed for `owedForMs`; answers how many it told or found gone. */
export async function sweepOwedTurns(options: LaneSweepOptions, owedForMs = OWED_TURN_MS) {
  const owed = await owedTurns(options.sql, owedForMs, SWEEP_OWED);
  await turnsTold(options.sql, await tellAgain(options, owed));
  return owed.length;
}

/** Both sweeps, each every its own while, until stopped (./sweeps.ts). */
export function startLaneSweep(options: LaneSweepOptions): { stop(): void } {
  const failed = (what: string) => (err: unknown) =>
    options.logError({ err }, `the sweep of ${what} failed`);
  const sweeps = [
    startSweep(STILL_EVERY_MS, () => sweepLaneHeads(options), failed("lane heads")),
    startSweep(
      OWED_EVERY_MS,
      async () => {
        const owed = await sweepOwedTurns(options);
        if (owed > 0) options.logWarn({ owed }, "ordered turns owed their signal were told again");
      },
      failed("owed turns"),
    ),
  ];
  return {
    stop: () => {
      for (const sweep of sweeps) sweep.stop();
    },
  };
}
