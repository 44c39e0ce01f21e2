/**
 * A target's own retry policy (`retry` on a target). Each setting it leaves out is the
 * deployment's (`RELAY_RETRY_*`: from 1 s, doubling, at most 1 h apart, for 24 h, no cap on
 * attempts). Which answers are worth a retry stays Relay's rule (./delivery.ts `classifyStatus`),
 * and a target's Retry-After still postpones an attempt, never hastens it.
 */
import type { Backoff } from "./delivery.ts";
import type { Plan, TargetRetry } from "./model.ts";

/** How one target's deliveries are retried: its backoff, its window and its cap on attempts. */
export interface RetrySchedule extends Backoff {
  /** How long a delivery is retried in all, from its call. */
  windowMs: number;
  /** Absent: attempts until the window closes. */
  maxAttempts?: number | undefined;
}

/** The deployment's schedule `defaults` with what `retry` sets in place of theirs. */
export function retryScheduleOf<S extends RetrySchedule>(defaults: S, retry?: TargetRetry): S {
  if (!retry) return defaults;
  const seconds = (value: number | undefined, fallbackMs: number) =>
    value === undefined ? fallbackMs : value * 1000;
  return {
    ...defaults,
    initialIntervalMs: seconds(retry.initialIntervalSeconds, defaults.initialIntervalMs),
    backoffCoefficient: retry.backoffCoefficient ?? defaults.backoffCoefficient,
    maximumIntervalMs: seconds(retry.maximumIntervalSeconds, defaults.maximumIntervalMs),
    windowMs: seconds(retry.windowSeconds, defaults.windowMs),
    maxAttempts: retry.maxAttempts ?? defaults.maxAttempts,
  };
}

type Bounds = Record<keyof TargetRetry, { min: number; max: number }>;

/**
 * What each plan allows. A paid project's deliveries may be retried for three days, a free one's
 * for a day (the deployment's default window); every delivery waiting to be retried holds its
 * credits meanwhile. A paid plan allows more attempts and longer waits; the rest is the same.
 */
const freeBounds: Bounds = {
  maxAttempts: { min: 1, max: 25 },
  initialIntervalSeconds: { min: 1, max: 3_600 },
  backoffCoefficient: { min: 1, max: 10 },
  maximumIntervalSeconds: { min: 1, max: 3_600 },
  windowSeconds: { min: 60, max: 86_400 },
};
export const retryBounds: Record<Plan, Bounds> = {
  free: freeBounds,
  paid: {
    ...freeBounds,
    maxAttempts: { min: 1, max: 100 },
    maximumIntervalSeconds: { min: 1, max: 21_600 },
    windowSeconds: { min: 60, max: 259_200 },
  },
};

/** Problems with `retry` under `plan`, each at its setting's name; [] when it may be saved. */
export function retryProblems(
  retry: TargetRetry,
  plan: Plan,
): { path: keyof TargetRetry; message: string }[] {
  const bounds = retryBounds[plan];
  const problems = (Object.keys(bounds) as (keyof TargetRetry)[]).flatMap((path) => {
    const value = retry[path];
    const { min, max } = bounds[path];
    if (value === undefined || (value >= min && value <= max)) return [];
    return [{ path, message: `a ${plan} project's targets take ${min} to ${max}` }];
  });
  const { initialIntervalSeconds: initial, maximumIntervalSeconds: maximum } = retry;
  if (initial !== undefined && maximum !== undefined && maximum < initial) {
    problems.push({
      path: "maximumIntervalSeconds",
      message: "is at least initialIntervalSeconds",
    });
  }
  return problems;
}
