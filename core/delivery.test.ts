import { describe, expect, test } from "vitest";
import { classifyStatus, retryAfterMs } from "./delivery.ts";

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
