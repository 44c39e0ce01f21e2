import { expect, test } from "vitest";
import {
  circuitAfter,
  circuitOutcome,
  circuitOutcomes,
  defaultCircuitBreaker,
  disablesAt,
  holdOf,
  MAX_PROBE_MS,
  probeDelayMs,
} from "./circuit.ts";
import { RETRIES_SPENT } from "./delivery.ts";

test("probes come a doubling interval apart, at most ten minutes", () => {
  expect([0, 1, 2, 3].map(probeDelayMs)).toEqual([5000, 10_000, 20_000, 40_000]);
  expect(probeDelayMs(7)).toBe(MAX_PROBE_MS);
  expect(probeDelayMs(10_000)).toBe(MAX_PROBE_MS);
});

test("a delivered attempt ends the run, a retryable failure extends it, a rejection leaves it", () => {
  const message = "target answered";
  expect(circuitOutcome({ kind: "delivered", status: 200 })).toBe("succeeded");
  expect(circuitOutcome({ kind: "retry", type: "TargetRetry", message, delayMs: 1 })).toBe(
    "failed",
  );
  expect(circuitOutcome({ kind: "failed", type: "TargetRejected", message })).toBe("neutral");
  // The last of a target's attempts failing as a retry would: a failure of the target still.
  expect(circuitOutcome({ kind: "failed", type: RETRIES_SPENT, message })).toBe("failed");
});

test("a pause holds before the circuit does; a closed circuit holds nothing", () => {
  const gate = { state: "closed", targetPaused: false, endpointPaused: false } as const;
  expect(holdOf(gate)).toBeNull();
  expect(holdOf({ ...gate, state: "open" })).toBe("circuit_open");
  expect(holdOf({ ...gate, state: "disabled" })).toBe("disabled");
  expect(holdOf({ ...gate, state: "open", endpointPaused: true })).toBe("paused");
  expect(holdOf({ ...gate, targetPaused: true })).toBe("paused");
});

test("an open circuit disables its target after its endpoint's limit", () => {
  expect(disablesAt(1000, defaultCircuitBreaker)).toBe(1000 + 86_400_000);
  expect(disablesAt(0, { ...defaultCircuitBreaker, disableAfterSeconds: 5 })).toBe(5000);
});

test("a set of outcomes: targets with only successes close together; a target with a failure moves end by end, in target order", () => {
  const moves = circuitOutcomes([
    { targetId: "b", outcome: "succeeded" },
    { targetId: "c", outcome: "failed" },
    { targetId: "a", outcome: "succeeded" },
    { targetId: "c", outcome: "succeeded" },
    { targetId: "b", outcome: "succeeded" },
    { targetId: "d", outcome: "neutral" },
    { targetId: "a", outcome: "failed" },
  ]);
  expect(moves).toEqual({
    succeededOnly: ["b"],
    moving: [2, 6, 1, 3],
    targets: ["a", "b", "c"],
  });
});

test("a set's outcomes move a circuit in order: failures in the window open it at the threshold, a success ends the run and closes it", () => {
  const breaker = { failureThreshold: 3, windowSeconds: 60, disableAfterSeconds: 3600 };
  const at = (s: number) => new Date(Date.UTC(2026, 11, 4, 12, 0, s));
  const closed = { state: "closed" as const, failures: 0, failingSince: null, openedAt: null };
  const failed = (s: number) => ({ outcome: "failed" as const, at: at(s) });
  const succeeded = (s: number) => ({ outcome: "succeeded" as const, at: at(s) });
  const neutral = (s: number) => ({ outcome: "neutral" as const, at: at(s) });

  const opened = circuitAfter(closed, breaker, [failed(1), neutral(2), failed(3), failed(4)]);
  expect(opened.moved).toEqual([null, null, null, "opened"]);
  expect(opened.run).toEqual({ state: "open", failures: 3, failingSince: at(1), openedAt: at(4) });

  const recovered = circuitAfter(opened.run, breaker, [failed(5), succeeded(6), failed(7)]);
  expect(recovered.moved).toEqual([null, "recovered", null]);
  expect(recovered.run).toEqual({
    state: "closed",
    failures: 1,
    failingSince: at(7),
    openedAt: null,
  });

  // A run begun outside the window starts again; a success on a clean circuit changes nothing.
  const stale = { ...closed, failures: 2, failingSince: new Date(at(0).getTime() - 120_000) };
  expect(circuitAfter(stale, breaker, [failed(1)]).run).toMatchObject({
    failures: 1,
    failingSince: at(1),
  });
  expect(circuitAfter(closed, breaker, [succeeded(1)])).toEqual({ run: closed, moved: [null] });
  // A disabled target counts failures and stays disabled; a success resets its run only.
  const disabled = { ...closed, state: "disabled" as const, failures: 9, failingSince: at(0) };
  expect(circuitAfter(disabled, breaker, [failed(1)])).toMatchObject({
    run: { state: "disabled", failures: 10 },
    moved: [null],
  });
  expect(circuitAfter(disabled, breaker, [succeeded(1)]).run).toMatchObject({
    state: "disabled",
    failures: 0,
  });
});
