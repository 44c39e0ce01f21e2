/**
 * targetCircuit: one per target while its deliveries wait (workflow id `circuit-{targetId}`),
 * started by the attempt that opened its circuit, or by the control plane when a member resumes
 * or enables the target. Each round it reads the circuit: open, it waits a growing interval and
 * lets one waiting delivery go as the probe; disabled or paused, it waits for a member; free, it
 * lets the waiting deliveries go, DRAIN_PER_SECOND at most (a limited target's at its own pace
 * and concurrency, core/flow.ts), and ends when none is left.
 */
import {
  condition,
  continueAsNew,
  defineSignal,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  workflowInfo,
} from "@temporalio/workflow";
import {
  DRAIN_BATCH,
  DRAIN_PER_SECOND,
  disablesAt,
  type Hold,
  probeDelayMs,
} from "../core/circuit.ts";
import { drainRound, nextRoundMs } from "../core/flow.ts";
import type { NotificationEvent, NotificationType } from "../core/notifications.ts";
import { CIRCUIT_CHANGED_SIGNAL } from "../core/temporal.ts";
import type { CircuitState } from "../store/circuits.ts";
import type { Released } from "../store/held.ts";
import type { Activities } from "./activities.ts";
import { raise } from "./notifications.ts";
import { probedSignal, releaseSignal } from "./signals.ts";

const bookkeeping = { startToCloseTimeout: "10 seconds", retry: { maximumInterval: "1 minute" } };
const { recordProbeFailed, disableTarget } = proxyActivities<Activities>(bookkeeping);

/**
 * Each round's read and release run as local activities: a limited target's drain comes round
 * every few hundred ms, and an activity's trip through the task queue was most of a round.
 * Circuits that began before replay them as activities (Temporal's patching).
 */
const DRAIN_LOCALLY = "drain-locally";
/** A deleted target's circuit lets its held deliveries go (histories before it just ended). */
const LET_GO_OF_GONE = "let-go-of-gone";
const local = proxyLocalActivities<Activities>(bookkeeping);
const remote = proxyActivities<Activities>(bookkeeping);
const rounds = () => (patched(DRAIN_LOCALLY) ? local : remote);
const circuitState = (targetId: string) => rounds().circuitState(targetId);
const releaseHeld = async (targetId: string, limit: number, probe: boolean) =>
  (await rounds().releaseHeld(targetId, limit, probe)).map(releasedOf);

/** Rounds recorded before a batch could hold deliveries answered workflow ids alone. */
const releasedOf = (r: Released | string): Released =>
  typeof r === "string" ? { workflowId: r, requestId: r } : r;

export const changedSignal = defineSignal(CIRCUIT_CHANGED_SIGNAL);

/** How long a probe may take before it counts as failed: a target's longest timeout, and room. */
const PROBE_WAIT_MS = 2 * 60_000;
/** A round of its own at least this often while a member's word is awaited. */
const MEMBER_WAIT = "1 hour";
/** Rounds per run before the history starts afresh (continue-as-new). */
const ROUNDS_PER_RUN = 500;

export interface CircuitRun {
  targetId: string;
  /** Probes that failed in a row since the circuit opened. */
  failedProbes?: number;
  /** What held the target in the last run's last round (its events are raised on a change). */
  lastHold?: Hold | null;
}

export async function targetCircuit({
  targetId,
  failedProbes = 0,
  lastHold = null,
}: CircuitRun): Promise<void> {
  let changed = false;
  let probed = false;
  setHandler(changedSignal, () => {
    changed = true;
  });
  setHandler(probedSignal, () => {
    probed = true;
  });
  /** Waits `ms`, or less when a member changes the target. */
  const waitOrChange = async (ms: number | string) => {
    changed = false;
    await condition(() => changed, ms);
  };
  let probes = failedProbes;
  let held = lastHold;
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    const state = await circuitState(targetId);
    if (!state.exists) {
      if (!patched(LET_GO_OF_GONE)) return;
      // Deleted: what still waits for it is let go a batch a round, each to find it gone and end
      // (cancelled: the target was deleted).
      const waiting = await releaseHeld(targetId, DRAIN_BATCH, false);
      if (waiting.length === 0) return;
      await Promise.all(waiting.map((held) => release(held, targetId, false)));
      continue;
    }
    const hold: Hold | null = state.hold;
    const event = circuitEvent(held, hold);
    if (event) await raise(circuitNotification(event, targetId, state, round));
    held = hold;
    if (hold === "circuit_open") {
      if (state.openedAtMs && Date.now() >= disablesAt(state.openedAtMs, state.breaker)) {
        await disableTarget(targetId);
        continue;
      }
      await waitOrChange(probeDelayMs(probes));
      if (changed) continue;
      const [probe] = await releaseHeld(targetId, 1, true);
      if (!probe) continue; // nothing waits: the next delivery to come is the probe
      probed = false;
      if (!(await release(probe, targetId, true))) continue;
      await condition(() => probed, PROBE_WAIT_MS);
      if ((await circuitState(targetId)).hold === "circuit_open") {
        probes++;
        await recordProbeFailed(targetId);
      }
      continue;
    }
    probes = 0;
    if (hold) {
      await waitOrChange(MEMBER_WAIT); // paused or disabled: a member lets them go
      continue;
    }
    // A limited target drains at its own pace (core/flow.ts); any other at DRAIN_PER_SECOND.
    const { flow } = state;
    changed = false;
    const waiting = await releaseHeld(targetId, flow ? drainRound(flow) : DRAIN_BATCH, false);
    // Done when nothing waits; a delivery held since (it signals) is let go next round.
    if (waiting.length === 0 && !changed && !(flow && state.waiting > 0)) return;
    await Promise.all(waiting.map((held) => release(held, targetId, false)));
    await sleep(flow ? nextRoundMs(flow, waiting.length) : (DRAIN_BATCH * 1000) / DRAIN_PER_SECOND);
  }
  await continueAsNew<typeof targetCircuit>({ targetId, failedProbes: probes, lastHold: held });
}

/** The event a change of hold between two rounds raises; a member's pause raises none. */
function circuitEvent(before: Hold | null, now: Hold | null): NotificationType | null {
  if (before === now) return null;
  if (now === "circuit_open") return "target.circuit_opened";
  if (now === "disabled") return "target.disabled";
  const wasOpen = before === "circuit_open" || before === "disabled";
  return now === null && wasOpen ? "target.recovered" : null;
}

function circuitNotification(
  type: NotificationType,
  targetId: string,
  state: CircuitState,
  round: number,
): NotificationEvent {
  const { runId } = workflowInfo();
  const { project = "", line = "", endpoint = "", name = "" } = state.target ?? {};
  return {
    // Unique per raise, the same when this history replays.
    id: `${type}.${targetId}.${runId}.${round}`,
    type,
    project,
    at: new Date().toISOString(),
    data: { line, endpoint, target: { id: targetId, name }, waiting: state.waiting },
  };
}

/** Tells a waiting delivery its target may be tried; false when its workflow has ended. */
async function release(held: Released, targetId: string, probe: boolean): Promise<boolean> {
  const { workflowId, requestId } = held;
  return getExternalWorkflowHandle(workflowId)
    .signal(releaseSignal, { targetId, probe, ...(requestId !== workflowId && { requestId }) })
    .then(
      () => true,
      () => false,
    );
}
