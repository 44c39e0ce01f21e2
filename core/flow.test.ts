import { expect, test } from "vitest";
import { drainRound, FLOW_HORIZON_MS, flowLimitsOf, flowStart } from "./flow.ts";

const limits = { perSecond: 20, maxConcurrent: 5 };
const free = { nextStartAtMs: 0, inFlight: 0, othersWaiting: false };

test("a target with neither limit has no flow control", () => {
  expect(flowLimitsOf({})).toBeNull();
  expect(flowLimitsOf({ maxConcurrent: 3 })).toEqual({ perSecond: null, maxConcurrent: 3 });
});

test("starts are spaced 1/rate apart, booked up to the horizon ahead and no further", () => {
  let state = free;
  const starts: number[] = [];
  for (;;) {
    const start = flowStart({ ...state, inFlight: 0 }, limits, 1000, false);
    if (!start) break;
    starts.push(start.startAtMs);
    state = { ...state, nextStartAtMs: start.nextStartAtMs };
  }
  expect(starts).toEqual([1000, 1050, 1100, 1150, 1200, 1250]);
  expect(starts.at(-1)).toBe(1000 + FLOW_HORIZON_MS);
});

test("a full concurrency has no room; a newcomer goes behind deliveries already waiting, one let go from the queue does not", () => {
  expect(flowStart({ ...free, inFlight: 5 }, limits, 0, true)).toBeNull();
  expect(flowStart({ ...free, othersWaiting: true }, limits, 0, false)).toBeNull();
  expect(flowStart({ ...free, othersWaiting: true }, limits, 0, true)).toEqual({
    startAtMs: 0,
    nextStartAtMs: 50,
  });
});

test("a drain round lets go what the pace books within the horizon and the free concurrency allow", () => {
  expect(drainRound(limits, 0, 10)).toEqual({ release: 5, waitMs: 250 });
  expect(drainRound(limits, 3, 10)).toEqual({ release: 2, waitMs: 250 });
  expect(drainRound(limits, 5, 10)).toEqual({ release: 0, waitMs: 250 });
  expect(drainRound({ perSecond: 1, maxConcurrent: null }, 0, 10)).toEqual({
    release: 1,
    waitMs: 1000,
  });
  expect(drainRound({ perSecond: null, maxConcurrent: 2 }, 0, 10)).toEqual({
    release: 2,
    waitMs: 250,
  });
});
