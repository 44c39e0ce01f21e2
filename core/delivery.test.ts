import { describe, expect, test } from "vitest";
import {
  attemptVerdict,
  bodyTravelsInline,
  classifyStatus,
  INLINE_BODY_BYTES,
  nextRetryDelayMs,
  retryAfterMs,
} from "./delivery.ts";

describe("classifyStatus", () => {
  test.each([
    [200, "delivered"],
    [204, "delivered"],
    [408, "retry"],
    [425, "retry"],
    [429, "retry"],
    [500, "retry"],
    [503, "retry"],
    [301, "failed"],
    [400, "failed"],
    [404, "failed"],
    [410, "failed"],
  ] as const)("%i is %s", (status, outcome) => {
    expect(classifyStatus(status)).toBe(outcome);
  });
});

describe("retryAfterMs", () => {
  const now = new Date("2026-01-01T00:00:00Z");
  test("seconds and HTTP dates", () => {
    expect(retryAfterMs("2", now)).toBe(2000);
    expect(retryAfterMs("Thu, 01 Jan 2026 00:00:05 GMT", now)).toBe(5000);
  });
  test("absent or unreadable is null; a past date is zero", () => {
    expect(retryAfterMs(null, now)).toBeNull();
    expect(retryAfterMs("soon", now)).toBeNull();
    expect(retryAfterMs("Wed, 31 Dec 2025 00:00:00 GMT", now)).toBe(0);
  });
});

describe("nextRetryDelayMs", () => {
  const backoff = { initialIntervalMs: 1000, backoffCoefficient: 2, maximumIntervalMs: 60_000 };
  test("Retry-After: 0 or 1 never comes sooner than the backoff's own wait, which keeps growing", () => {
    expect([1, 2, 3, 4].map((attempt) => nextRetryDelayMs(0, attempt, backoff))).toEqual([
      1000, 2000, 4000, 8000,
    ]);
    expect(nextRetryDelayMs(1000, 5, backoff)).toBe(16_000);
    expect(nextRetryDelayMs(null, 20, backoff)).toBe(60_000);
  });
  test("a longer Retry-After postpones the attempt", () => {
    expect(nextRetryDelayMs(30_000, 2, backoff)).toBe(30_000);
  });
});

describe("attemptVerdict", () => {
  const backoff = { initialIntervalMs: 1000, backoffCoefficient: 2, maximumIntervalMs: 60_000 };
  const now = new Date("2026-11-23T12:00:00Z");
  const seen = { status: null, retryAfter: null, error: null, refused: false };
  test("a 2xx is delivered; a 4xx not worth retrying and a refused address fail for good", () => {
    expect(attemptVerdict({ ...seen, status: 204 }, 1, backoff, now)).toEqual({
      kind: "delivered",
      status: 204,
    });
    expect(attemptVerdict({ ...seen, status: 400 }, 1, backoff, now)).toMatchObject({
      kind: "failed",
      type: "TargetRejected",
    });
    expect(
      attemptVerdict({ ...seen, refused: true, error: "refused: 10.0.0.1" }, 1, backoff, now),
    ).toEqual({ kind: "failed", type: "TargetRefused", message: "refused: 10.0.0.1" });
  });
  test("no answer and a 5xx are retried on the backoff of their attempt number", () => {
    expect(attemptVerdict({ ...seen, error: "ECONNREFUSED" }, 3, backoff, now)).toEqual({
      kind: "retry",
      type: "TargetUnreachable",
      message: "target unreachable: ECONNREFUSED",
      delayMs: 4000,
    });
    expect(attemptVerdict({ ...seen, status: 503 }, 1, backoff, now)).toMatchObject({
      kind: "retry",
      type: "TargetRetry",
      delayMs: 1000,
    });
  });
  test("a 429's Retry-After postpones the next attempt", () => {
    expect(
      attemptVerdict({ ...seen, status: 429, retryAfter: "120" }, 1, backoff, now),
    ).toMatchObject({ kind: "retry", delayMs: 120_000 });
  });
});

describe("bodies in workflow inputs", () => {
  test("a body copied into many activities goes by reference before the copies pass 1 MiB", () => {
    expect(bodyTravelsInline(1024, 50)).toBe(true);
    expect(bodyTravelsInline(INLINE_BODY_BYTES, 1)).toBe(true);
    expect(bodyTravelsInline(INLINE_BODY_BYTES, 16)).toBe(false);
    expect(bodyTravelsInline(INLINE_BODY_BYTES + 1, 0)).toBe(false);
  });
});
