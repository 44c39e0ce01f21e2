import { expect, test } from "vitest";
import {
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
