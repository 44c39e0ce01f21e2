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
 * this long after now and waits for it in its attempt; past it, it waits held.
 */
export const FLOW_HORIZON_MS = 250;

/** A limited target's flow now, as Postgres has it. */
export interface FlowState {
  /** The earliest time the next start may be, in ms since the epoch. */
  nextStartAtMs: number;
  inFlight: number;
  /** Deliveries of the target wait held: a newcomer goes behind them. */
  othersWaiting: boolean;
}

/**
 * A start at a limited target: when it may be and the pace after it, or null when there is no
 * room (its concurrency is full, its next start is past the horizon, or, for a delivery not let
 * go from the queue, others wait before it).
 */
export function flowStart(
  state: FlowState,
  limits: FlowLimits,
  nowMs: number,
  fromQueue: boolean,
): { startAtMs: number; nextStartAtMs: number } | null {
  if (state.othersWaiting && !fromQueue) return null;
  if (limits.maxConcurrent !== null && state.inFlight >= limits.maxConcurrent) return null;
  if (limits.perSecond === null) return { startAtMs: nowMs, nextStartAtMs: state.nextStartAtMs };
  const startAtMs = Math.max(state.nextStartAtMs, nowMs);
  if (startAtMs - nowMs > FLOW_HORIZON_MS) return null;
  return { startAtMs, nextStartAtMs: startAtMs + 1000 / limits.perSecond };
}

/**
 * One round of a limited target's drain: how many waiting deliveries to let go (what its pace
 * books within the horizon and its free concurrency allow), and how long until the next round.
 */
export function drainRound(
  limits: FlowLimits,
  inFlight: number,
  maxBatch: number,
): { release: number; waitMs: number } {
  const byPace =
    limits.perSecond === null
      ? maxBatch
      : Math.max(1, Math.floor((limits.perSecond * FLOW_HORIZON_MS) / 1000));
  const free = limits.maxConcurrent === null ? maxBatch : limits.maxConcurrent - inFlight;
  const release = Math.max(0, Math.min(byPace, free, maxBatch));
  const paced = limits.perSecond === null ? 0 : (release * 1000) / limits.perSecond;
  return { release, waitMs: Math.max(FLOW_HORIZON_MS, paced) };
}
