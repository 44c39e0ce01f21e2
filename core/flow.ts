/**
 * Flow control per target (issue 28): a limited target's async deliveries start at most
 * `maxDeliveriesPerSecond` a second, evenly spaced (so any one-second window holds at most the
 * limit and one), and at most `maxConcurrent` are in flight. Deliveries over them wait as held
 * ones do (store/circuits.ts: durably, holding nothing) and are let go in the order Relay
 * accepted them, as capacity frees, by the target's drain workflow (workflows/circuit.ts). The
 * state is in Postgres, so every worker and edge sees one pace and one count.
 */
/** A target's limits; null fields are unlimited. */
export interface FlowLimits {
  perSecond: number | null;
  maxConcurrent: number | null;
}

/** Why a delivery waits when its target is limited and has no room for it now. */
export const THROTTLED = "throttled" as const;

export function flowLimitsOf(target: {
  maxDeliveriesPerSecond?: number | null | undefined;
  maxConcurrent?: number | null | undefined;
}): FlowLimits | null {
  const perSecond = target.maxDeliveriesPerSecond ?? null;
  const maxConcurrent = target.maxConcurrent ?? null;
  return perSecond === null && maxConcurrent === null ? null : { perSecond, maxConcurrent };
}

/**
 * How far ahead a start may be booked: a delivery let go (or arriving) finds its start at most
 * this long after now and waits for it in its attempt; past it, it waits held. A second: a
 * delivery let go takes a few Temporal tasks to reach its attempt, so the drain lets go a
 * second's worth at a time and each waits for its own turn.
 */
export const FLOW_HORIZON_MS = 1000;

/** A limited target's drain lets go at most this many in a round. */
export const FLOW_DRAIN_MAX = 200;

/**
 * Starts are spaced a quarter more than 1/limit apart: between its booked start and its call an
 * attempt may be delayed (a busy worker, a slow write), and two delayed unequally must not put
 * more than the limit and one into one second at the target.
 */
export const PACE_MARGIN = 1.25;

/** A limited target's pace now, as Postgres has it. */
export interface FlowState {
  /** The earliest time the next start may be, in ms since the epoch. */
  nextStartAtMs: number;
  /** Deliveries of the target wait held: a newcomer goes behind them. */
  othersWaiting: boolean;
}

/**
 * A start at a limited target's pace: when it may be and the pace after it, or null when there
 * is none for it (its next start is past the horizon, or, for a delivery not let go from the
 * queue, others wait before it). Its place among those in flight is taken at that time
 * (`hasPlace`), so a delivery waiting for its start holds none.
 */
export function flowStart(
  state: FlowState,
  limits: FlowLimits,
  nowMs: number,
  fromQueue: boolean,
): { startAtMs: number; nextStartAtMs: number } | null {
  if (state.othersWaiting && !fromQueue) return null;
  if (limits.perSecond === null) return { startAtMs: nowMs, nextStartAtMs: state.nextStartAtMs };
  const startAtMs = Math.max(state.nextStartAtMs, nowMs);
  if (startAtMs - nowMs > FLOW_HORIZON_MS) return null;
  return { startAtMs, nextStartAtMs: startAtMs + (PACE_MARGIN * 1000) / limits.perSecond };
}

/** Whether a limited target has a place among its attempts in flight for one more. */
export function hasPlace(limits: FlowLimits, inFlight: number): boolean {
  return limits.maxConcurrent === null || inFlight < limits.maxConcurrent;
}

/**
 * How many waiting deliveries one round of a limited target's drain lets go: what its pace books
 * within the horizon (its concurrency is counted where they are let go, store/flow.ts).
 */
export function drainRound(limits: FlowLimits): number {
  if (limits.perSecond === null) return FLOW_DRAIN_MAX;
  const byPace = Math.floor((limits.perSecond * FLOW_HORIZON_MS) / 1000);
  return Math.min(FLOW_DRAIN_MAX, Math.max(1, byPace));
}

/**
 * How long until a limited target's next drain round, after one that let `released` go: a little
 * less than those take at the pace, so the next ones are on their way when these have started.
 * By what it let go, not what it wanted: a round its concurrency held short comes back sooner.
 */
export function nextRoundMs(limits: FlowLimits, released: number): number {
  if (limits.perSecond === null) return MIN_ROUND_MS;
  return Math.max(MIN_ROUND_MS, (0.75 * released * 1000) / limits.perSecond);
}

const MIN_ROUND_MS = 250;

/**
 * Of `wanted` deliveries a drain round would let go, how many may go: those already on their way
 * (let go, not started) leave room for a second round at most, and under a concurrency limit the
 * places in flight and one wave more may be taken. A paced target's wave is what its pace books
 * within the horizon: those wait for their starts without a place, so a limit of 5 at once does
 * not hold a target paced at 20 a second to 10 a round trip.
 */
export function roomToRelease(
  limits: FlowLimits,
  wanted: number,
  counts: { started: number; onTheirWay: number },
): number {
  const byWay = 2 * wanted - counts.onTheirWay;
  if (limits.maxConcurrent === null) return Math.max(0, Math.min(wanted, byWay));
  const wave =
    limits.perSecond === null ? limits.maxConcurrent : Math.max(limits.maxConcurrent, wanted);
  const byConcurrency = limits.maxConcurrent + wave - counts.started - counts.onTheirWay;
  return Math.max(0, Math.min(wanted, byWay, byConcurrency));
}
