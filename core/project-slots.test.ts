import { describe, expect, test } from "vitest";
import { BUSY_WAIT_MS, busyWaitMs, ProjectSlots } from "./project-slots.ts";

describe("ProjectSlots", () => {
  test("a project has at most its share in flight; others are not touched by it", () => {
    const slots = new ProjectSlots({ slots: 4, perProject: 2 });
    expect(slots.take("a")).not.toBeNull();
    expect(slots.take("a")).not.toBeNull();
    expect(slots.take("a")).toBeNull();
    expect(slots.take("b")).not.toBeNull();
    expect(slots.count("a")).toBe(2);
  });

  test("a pool less than half in use lets a project past its share, up to half the pool", () => {
    const slots = new ProjectSlots({ slots: 10, perProject: 2 });
    const taken = Array.from({ length: 6 }, () => slots.take("a"));
    expect(taken.filter(Boolean)).toHaveLength(5);
    expect(slots.take("b")).not.toBeNull();
    expect(slots.take("b")).not.toBeNull();
    expect(slots.take("b")).toBeNull();
  });

  test("a released slot can be taken again, and releasing twice gives back one", () => {
    const slots = new ProjectSlots({ slots: 2, perProject: 1 });
    const release = slots.take("a");
    release?.();
    release?.();
    expect(slots.count("a")).toBe(0);
    expect(slots.take("a")).not.toBeNull();
    expect(slots.take("a")).toBeNull();
  });

  test("takeWithin gives a freed slot to one waiting caller, in the order asked, or null in time", async () => {
    const seen: string[] = [];
    const slots = new ProjectSlots(
      { slots: 2, perProject: 1 },
      { turnedAway: (project) => seen.push(`${project} away`) },
    );
    const first = slots.take("a");
    slots.take("b");
    const given: string[] = [];
    const waiting = ["one", "two"].map((name) =>
      slots.takeWithin("a", 1000).then((release) => {
        given.push(name);
        return release;
      }),
    );
    const late = slots.takeWithin("a", 10);
    expect(await late).toBeNull();
    expect(seen).toEqual(["a away"]);
    first?.();
    const one = await waiting[0];
    expect(given).toEqual(["one"]);
    one?.();
    expect(await waiting[1]).not.toBeNull();
    expect(given).toEqual(["one", "two"]);
  });

  test("a slot freed goes to the next project whose share allows it, projects in turn", async () => {
    const slots = new ProjectSlots({ slots: 4, perProject: 1 });
    const [a, , b] = [slots.take("a"), slots.take("a"), slots.take("b"), slots.take("c")];
    const order: string[] = [];
    const asked = ["a", "b", "c"].map((project) =>
      slots.takeWithin(project, 1000).then((release) => {
        order.push(project);
        return release;
      }),
    );
    // a's slot: a is still at its share (one more in flight), b and c are too; nothing given.
    a?.();
    await Promise.resolve();
    expect(order).toEqual([]);
    // b's slot: b is under its share now, and gets it; a waits on.
    b?.();
    await asked[1];
    expect(order).toEqual(["b"]);
  });

  test("the observer hears each count and each call turned away", () => {
    const seen: [string, number | "away"][] = [];
    const slots = new ProjectSlots(
      { slots: 4, perProject: 2 },
      {
        inFlight: (project, count) => seen.push([project, count]),
        turnedAway: (project) => seen.push([project, "away"]),
      },
    );
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

  test("a turned-away call waits longer the more of its project's calls wait and the slower its slots free", () => {
    let now = 0;
    const slots = new ProjectSlots({ slots: 2, perProject: 1 }, {}, () => now);
    const held = slots.take("slow");
    slots.take("slow");
    now += 60_000;
    const afterOne = slots.waitMs("slow", 0.5);
    for (let i = 0; i < 99; i++) slots.take("slow");
    const afterHundred = slots.waitMs("slow", 0.5);
    expect(afterHundred).toBeGreaterThan(afterOne);
    expect(afterHundred).toBe(BUSY_WAIT_MS.max);

    // A project whose slots free fast has its calls back soon.
    for (let i = 0; i < 50; i++) {
      now += 100;
      slots.take("fast")?.();
    }
    slots.take("fast");
    slots.take("fast");
    expect(slots.waitMs("fast", 0.5)).toBe(BUSY_WAIT_MS.min);
    held?.();
  });

  test("a worker that has only just begun to see a project waits it about as long as it has seen it: a restarted worker takes its backlog back in seconds", () => {
    let now = 0;
    const slots = new ProjectSlots({ slots: 100, perProject: 25 }, {}, () => now);
    // Just restarted: its share in flight, a burst of 720 turned away, nothing finished yet.
    for (let i = 0; i < 745; i++) slots.take("backlog");
    expect(slots.waitMs("backlog", 0.999)).toBe(BUSY_WAIT_MS.min);
    now += 3_000;
    expect(slots.waitMs("backlog", 0.999)).toBeLessThanOrEqual(6_000);
    // Slots that have not freed in a minute are slow ones: their calls wait long.
    now += 60_000;
    for (let i = 0; i < 100; i++) slots.take("backlog");
    expect(slots.waitMs("backlog", 0.5)).toBe(BUSY_WAIT_MS.max);
  });

  test("counts older than two windows are forgotten", () => {
    let now = 0;
    const slots = new ProjectSlots({ slots: 2, perProject: 1 }, {}, () => now);
    slots.take("a");
    for (let i = 0; i < 100; i++) slots.take("a");
    now += 60_000;
    expect(slots.waitMs("a", 0.5)).toBe(BUSY_WAIT_MS.min);
  });
});

describe("busyWaitMs", () => {
  const load = { waiting: 10, finishedPerSecond: 5, perProject: 10, watchedMs: 600_000 };
  test("is the time the project's slots take to serve those waiting, half to one and a half of it", () => {
    expect(busyWaitMs(load, 0.5)).toBe(2000);
    expect(busyWaitMs(load, 0)).toBe(1000);
    expect(busyWaitMs(load, 0.999)).toBeCloseTo(3000, -1);
  });
  test("counts slots that never free as freeing at the slowest call's pace, within its bounds", () => {
    expect(busyWaitMs({ ...load, finishedPerSecond: 0 }, 0.5)).toBe(90_000);
    expect(busyWaitMs({ ...load, waiting: 1000, finishedPerSecond: 0 }, 0.5)).toBe(
      BUSY_WAIT_MS.max,
    );
    expect(busyWaitMs({ ...load, waiting: 0 }, 0.5)).toBe(BUSY_WAIT_MS.min);
  });
  test("is at most twice as long as the worker has watched the project, and never under the least", () => {
    const slow = { ...load, waiting: 1000, finishedPerSecond: 0 };
    expect(busyWaitMs({ ...slow, watchedMs: 0 }, 0.5)).toBe(BUSY_WAIT_MS.min);
    expect(busyWaitMs({ ...slow, watchedMs: 5_000 }, 0.5)).toBe(10_000);
    expect(busyWaitMs({ ...slow, watchedMs: 600_000 }, 0.5)).toBe(BUSY_WAIT_MS.max);
  });
});
