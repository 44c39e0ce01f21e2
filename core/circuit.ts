/**
 * A target's circuit breaker, the rules alone (store/circuits.ts keeps the state, the
 * `targetCircuit` workflow runs it). A run of failed attempts within a window opens the circuit:
 * the target's deliveries then wait, durably and without attempts, while one probe at a time
 * tries it on a growing interval. The first success closes it and the waiting deliveries drain
 * at a bounded rate; a circuit open past a longer limit disables the target until a member
 * enables it again. A pause by hand holds deliveries the same way.
 */
import { type AttemptVerdict, RETRIES_SPENT } from "./delivery.ts";
import type { CircuitBreaker } from "./model.ts";

/** Defaults (README, "Delivery control"): ten failures in a row within five minutes; a day open. */
export const defaultCircuitBreaker: CircuitBreaker = {
  failureThreshold: 10,
  windowSeconds: 300,
  disableAfterSeconds: 24 * 60 * 60,
};

/** Bounds on an endpoint's settings. */
export const circuitBreakerBounds = {
  failureThreshold: { min: 1, max: 1000 },
  windowSeconds: { min: 1, max: 7 * 24 * 60 * 60 },
  disableAfterSeconds: { min: 5, max: 30 * 24 * 60 * 60 },
} as const;

/** The first probe comes this long after the circuit opens; each failed one doubles the wait. */
export const FIRST_PROBE_MS = 5_000;
export const MAX_PROBE_MS = 10 * 60_000;

/** How fast waiting deliveries are let go once the target may be tried again. */
export const DRAIN_PER_SECOND = 20;
export const DRAIN_BATCH = 10;

/** The wait before the probe after `failedProbes` failed ones. */
export function probeDelayMs(failedProbes: number): number {
  return Math.min(FIRST_PROBE_MS * 2 ** Math.min(failedProbes, 30), MAX_PROBE_MS);
}

/** How an attempt's outcome moves its target's circuit. */
export type CircuitOutcome = "failed" | "succeeded" | "neutral";

/**
 * A delivered attempt closes the run; one worth retrying (no answer, a timeout, 408, 425, 429,
 * 5xx) extends it; an answer not worth retrying (most 4xx) shows the target is up, but not that
 * it takes deliveries, so it leaves the run as it is; nor does an attempt its transformation
 * dropped or failed, which never reached it.
 */
export function circuitOutcome(verdict: AttemptVerdict): CircuitOutcome {
  if (verdict.kind === "delivered") return "succeeded";
  // A last attempt's failure is a failure of the target all the same.
  const spent = verdict.kind === "failed" && verdict.type === RETRIES_SPENT;
  return verdict.kind === "retry" || spent ? "failed" : "neutral";
}

/** A set of attempts' circuit outcomes, as a set of ends writes them (store/attempt-log.ts). */
export interface CircuitMoves {
  /** Targets whose outcomes in the set are all successes (or neutral), sorted. */
  succeededOnly: string[];
  /** The ends at a target with a failure in the set, by index: in target order, then the set's. */
  moving: number[];
  /** Every target with an outcome that moves it, sorted: the lock order. */
  targets: string[];
}

export function circuitOutcomes(
  ends: readonly { targetId: string; outcome: CircuitOutcome }[],
): CircuitMoves {
  const failing = new Set(ends.filter((e) => e.outcome === "failed").map((e) => e.targetId));
  const byTarget = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const moving = ends
    .flatMap((e, i) => (failing.has(e.targetId) && e.outcome !== "neutral" ? [i] : []))
    .sort((a, b) => byTarget(ends[a]?.targetId ?? "", ends[b]?.targetId ?? "") || a - b);
  const succeeded = ends.filter((e) => e.outcome === "succeeded").map((e) => e.targetId);
  return {
    succeededOnly: [...new Set(succeeded.filter((t) => !failing.has(t)))].sort(byTarget),
    moving,
    targets: [...new Set([...succeeded, ...failing])].sort(byTarget),
  };
}

/** A target's circuit as its row keeps it (store/circuits.ts): its state and its run of failures. */
export interface CircuitRun {
  state: "closed" | "open" | "disabled";
  failures: number;
  failingSince: Date | null;
  openedAt: Date | null;
}

/** What an outcome did to its target's circuit. */
export type CircuitMove = "opened" | "recovered" | null;

/**
 * A target's circuit after a set's outcomes for it, in order, and what each did: a success ends
 * the run of failures (and closes an open circuit: recovered); a failure extends the run when it
 * began within the breaker's window before it, else begins one, and a closed circuit whose run
 * reaches the threshold opens.
 */
export function circuitAfter(
  run: CircuitRun,
  breaker: CircuitBreaker,
  outcomes: readonly { outcome: CircuitOutcome; at: Date }[],
): { run: CircuitRun; moved: CircuitMove[] } {
  let now = run;
  const moved = outcomes.map(({ outcome, at }): CircuitMove => {
    if (outcome === "succeeded") {
      if (now.failures === 0 && now.state !== "open") return null;
      const wasOpen = now.state === "open";
      now = {
        state: wasOpen ? "closed" : now.state,
        failures: 0,
        failingSince: null,
        openedAt: wasOpen ? null : now.openedAt,
      };
      return wasOpen ? "recovered" : null;
    }
    if (outcome === "neutral") return null;
    const since = now.failingSince;
    const inRun = since !== null && since.getTime() >= at.getTime() - breaker.windowSeconds * 1000;
    now = { ...now, failures: inRun ? now.failures + 1 : 1, failingSince: inRun ? since : at };
    if (now.state !== "closed" || now.failures < breaker.failureThreshold) return null;
    now = { ...now, state: "open", openedAt: at };
    return "opened";
  });
  return { run: now, moved };
}

/** Why a target's deliveries wait, or null when they may go. */
export type Hold = "paused" | "circuit_open" | "disabled";

export interface TargetGateState {
  state: "closed" | "open" | "disabled";
  targetPaused: boolean;
  endpointPaused: boolean;
}

/** What holds a target's deliveries now: a pause first (a member's word), then its circuit. */
export function holdOf(gate: TargetGateState): Hold | null {
  if (gate.targetPaused || gate.endpointPaused) return "paused";
  if (gate.state === "disabled") return "disabled";
  return gate.state === "open" ? "circuit_open" : null;
}

/** When an open circuit has been open long enough to disable its target, in ms since the epoch. */
export function disablesAt(openedAtMs: number, breaker: CircuitBreaker): number {
  return openedAtMs + breaker.disableAfterSeconds * 1000;
}
