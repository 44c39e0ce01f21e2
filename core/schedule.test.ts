import { describe, expect, test } from "vitest";
import { deliveryTime } from "./schedule.ts";

const now = new Date("2026-11-24T12:00:00Z");
const at = (delay: string | null, notBefore: string | null = null) =>
  deliveryTime({ delay, notBefore }, now);

describe("deliveryTime", () => {
  test("no header: at once", () => {
    expect(at(null)).toEqual({ notBefore: null });
  });

  test.each([
    ["30s", "2026-11-24T12:00:30.000Z"],
    ["15m", "2026-11-24T12:15:00.000Z"],
    ["2h", "2026-11-24T14:00:00.000Z"],
    ["7d", "2026-12-01T12:00:00.000Z"],
    ["604800s", "2026-12-01T12:00:00.000Z"],
  ])("Relay-Delay %s", (delay, expected) => {
    expect(at(delay)).toEqual({ notBefore: new Date(expected) });
  });

  test("a zero delay, or a time already past, is at once", () => {
    expect(at("0s")).toEqual({ notBefore: null });
    expect(at(null, "2026-11-24T11:00:00Z")).toEqual({ notBefore: null });
  });

  test.each([
    ["2026-11-24T13:00:00Z", "2026-11-24T13:00:00.000Z"],
    ["2026-11-24t13:00:00.5z", "2026-11-24T13:00:00.500Z"],
    ["2026-11-24 15:00:00+02:00", "2026-11-24T13:00:00.000Z"],
    ["2026-11-24T13:00:00.123456789-00:30", "2026-11-24T13:30:00.123Z"],
  ])("Relay-Not-Before %s", (notBefore, expected) => {
    expect(at(null, notBefore)).toEqual({ notBefore: new Date(expected) });
  });

  test.each([
    ["8d"],
    ["604801s"],
    ["10080m1"],
    ["99999999s"],
    ["-5s"],
    ["1.5h"],
    ["30"],
    ["30 s"],
    ["1w"],
    [""],
  ])("Relay-Delay %j is refused", (delay) => {
    expect(at(delay)).toHaveProperty("problem");
  });

  test.each([
    ["2026-12-01T12:00:01Z"],
    ["2026-11-24T13:00:00"],
    ["2026-11-24"],
    ["2026-02-30T12:00:00Z"],
    ["2026-11-24T24:00:00Z"],
    ["2026-11-24T12:00:60Z"],
    ["Tue, 24 Nov 2026 13:00:00 GMT"],
    ["1795521600"],
    ["2026-11-24T13:00:00+0200"],
  ])("Relay-Not-Before %j is refused", (notBefore) => {
    expect(at(null, notBefore)).toHaveProperty("problem");
  });

  test("both headers are refused", () => {
    expect(at("30s", "2026-11-24T13:00:00Z")).toEqual({
      problem: "send Relay-Delay or Relay-Not-Before, not both",
    });
  });
});
