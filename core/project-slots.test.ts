import { describe, expect, test } from "vitest";
import { BUSY_WAIT_MS, busyWaitMs, ProjectSlots } from "./project-slots.ts";

describe("ProjectSlots", () => {
  test("a project has at most its share in flight; others are not touched by it", () => {
    const slots = new ProjectSlots(2);
    const a1 = slots.take("a");
    const a2 = slots.take("a");
    expect(a1).not.toBeNull();
    expect(a2).not.toBeNull();
    expect(slots.take("a")).toBeNull();
    expect(slots.take("b")).not.toBeNull();
    expect(slots.count("a")).toBe(2);
  });

  test("a released slot can be taken again, and releasing twice gives back one", () => {
    const slots = new ProjectSlots(1);
    const release = slots.take("a");
    release?.();
    release?.();
    expect(slots.count("a")).toBe(0);
    expect(slots.take("a")).not.toBeNull();
    expect(slots.take("a")).toBeNull();
  });

  test("the observer hears each count and each call turned away", () => {
    const seen: [string, number | "away"][] = [];
    const slots = new ProjectSlots(2, {
      inFlight: (project, count) => seen.push([project, count]),
      turnedAway: (project) => seen.push([project, "away"]),
    });
    const release = slots.take("a");
    slots.take("a");
    slots.take("a");
    release?.();
    expect(seen).toEqual([
      ["a", 1],
      ["a", 2],
      ["a", "away"],
      ["a", 1],
    ]);
  });
});

describe("busyWaitMs", () => {
  test("doubles from the first wait to the longest, less up to a quarter at random", () => {
    expect(busyWaitMs(0, 0)).toBe(BUSY_WAIT_MS.first);
    expect(busyWaitMs(1, 0)).toBe(2 * BUSY_WAIT_MS.first);
    expect(busyWaitMs(10, 0)).toBe(BUSY_WAIT_MS.max);
    expect(busyWaitMs(1000, 0)).toBe(BUSY_WAIT_MS.max);
    expect(busyWaitMs(0, 0.999)).toBeGreaterThanOrEqual(0.75 * BUSY_WAIT_MS.first);
  });
});
