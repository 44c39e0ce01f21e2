/**
 * Signals between a target's deliveries and its circuit workflow (circuit.ts), to a batch, and
 * to an ordered request whose turn came (lanes.ts).
 */
import { defineSignal } from "@temporalio/workflow";
import { LANE_GO_SIGNAL } from "../core/lanes.ts";
import { HAND_ON_SIGNAL } from "../core/temporal.ts";

/**
 * A waiting delivery may try its target: as the one probe of an open circuit, or because the
 * target takes deliveries again (or has room). A batch holding many names which (`requestId`).
 */
export const releaseSignal =
  defineSignal<[{ targetId: string; probe: boolean; requestId?: string }]>("release");

/** The probe has been tried; the circuit workflow reads from the circuit how it went. */
export const probedSignal = defineSignal("probed");

/**
 * A request held in a batch (./batch-holds.ts) is to go on as its own workflow, where it can be
 * cancelled: the control plane's cancel sends it.
 */
export const handOnSignal = defineSignal<[string]>(HAND_ON_SIGNAL);

/**
 * An ordered request's turn has come at a target (store/lanes.ts); a batch carrying many is told
 * of all the turns given it together (`told`).
 */
export const goSignal =
  defineSignal<[{ targetId: string; requestId?: string; told?: LaneTurn[] }]>(LANE_GO_SIGNAL);

/** A turn given to a request at a target. */
interface LaneTurn {
  requestId: string;
  targetId: string;
}
