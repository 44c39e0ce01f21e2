/** Signals between a target's deliveries and its circuit workflow (circuit.ts). */
import { defineSignal } from "@temporalio/workflow";

/**
 * A waiting delivery may try its target: as the one probe of an open circuit, or because the
 * target takes deliveries again.
 */
export const releaseSignal = defineSignal<[{ targetId: string; probe: boolean }]>("release");

/** The probe has been tried; the circuit workflow reads from the circuit how it went. */
export const probedSignal = defineSignal("probed");
