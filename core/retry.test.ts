import { expect, test } from "vitest";
import { attemptVerdict } from "./delivery.ts";
import { retryBounds, retryProblems, retryScheduleOf } from "./retry.ts";

const deployment = {
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 3_600_000,
  windowMs: 86_400_000,
};

test("a target's settings replace the deployment's, one by one; none leaves them all", () => {
  expect(retryScheduleOf(deployment)).toBe(deployment);
  expect(retryScheduleOf(deployment, { initialIntervalSeconds: 5, maxAttempts: 3 })).toEqual({
    ...deployment,
    initialIntervalMs: 5_000,
    maxAttempts: 3,
  });
  expect(
    retryScheduleOf(deployment, {
      backoffCoefficient: 1.5,
      maximumIntervalSeconds: 60,
      windowSeconds: 600,
    }),
  ).toEqual({
    ...deployment,
    backoffCoefficient: 1.5,
    maximumIntervalMs: 60_000,
    windowMs: 600_000,
  });
});

test("the last of a target's attempts failing as a retry would fails for good", () => {
  const seen = { status: 503, retryAfter: null, error: null, refused: false };
  const now = new Date(0);
  const schedule = retryScheduleOf(deployment, { maxAttempts: 3 });
  expect(attemptVerdict(seen, 2, schedule, now)).toMatchObject({ kind: "retry", delayMs: 2_000 });
  expect(attemptVerdict(seen, 3, schedule, now)).toEqual({
    kind: "failed",
    type: "TargetRetriesSpent",
    message: "target answered 503; that was its last attempt (3)",
  });
  // An answer that ends the series on its own ends it as before, last attempt or not.
  expect(attemptVerdict({ ...seen, status: 200 }, 3, schedule, now)).toMatchObject({
    kind: "delivered",
  });
  expect(attemptVerdict({ ...seen, status: 400 }, 3, schedule, now)).toMatchObject({
    type: "TargetRejected",
  });
  expect(attemptVerdict(seen, 30, deployment, now).kind).toBe("retry");
});

test("a target's Retry-After still postpones its own backoff's wait, never hastens it", () => {
  const schedule = retryScheduleOf(deployment, { initialIntervalSeconds: 10 });
  const seen = { status: 429, retryAfter: "2", error: null, refused: false };
  expect(attemptVerdict(seen, 1, schedule, new Date(0))).toMatchObject({ delayMs: 10_000 });
  expect(attemptVerdict({ ...seen, retryAfter: "30" }, 1, schedule, new Date(0))).toMatchObject({
    delayMs: 30_000,
  });
});

test("each plan bounds every setting; the longest wait is at least the first", () => {
  expect(retryProblems({ maxAttempts: 5, windowSeconds: 86_400 }, "free")).toEqual([]);
  expect(retryProblems({ windowSeconds: 172_800 }, "free")).toEqual([
    { path: "windowSeconds", message: "a free project's targets take 60 to 86400" },
  ]);
  expect(retryProblems({ windowSeconds: 172_800 }, "paid")).toEqual([]);
  expect(retryProblems({ maxAttempts: 0, backoffCoefficient: 11 }, "paid")).toEqual([
    { path: "maxAttempts", message: "a paid project's targets take 1 to 100" },
    { path: "backoffCoefficient", message: "a paid project's targets take 1 to 10" },
  ]);
  expect(retryProblems({ initialIntervalSeconds: 60, maximumIntervalSeconds: 30 }, "paid")).toEqual(
    [{ path: "maximumIntervalSeconds", message: "is at least initialIntervalSeconds" }],
  );
  // What a free plan allows, a paid one does too.
  for (const [name, free] of Object.entries(retryBounds.free)) {
    const paid = retryBounds.paid[name as keyof typeof retryBounds.paid];
    expect(paid.min).toBeLessThanOrEqual(free.min);
    expect(paid.max).toBeGreaterThanOrEqual(free.max);
  }
});
