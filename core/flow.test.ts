import { expect, test } from "vitest";
import {
  drainRound,
  FLOW_DRAIN_MAX,
  FLOW_HORIZON_MS,
  flowLimitsOf,
  flowStart,
  hasPlace,
  nextRoundMs,
  roomToRelease,
} from "./flow.ts";

const limits = { perSecond: 20, maxConcurrent: 5 };
const free = { nextStartAtMs: 0, othersWaiting: false };

test("a target with neither limit has no flow control", () => {
  expect(flowLimitsOf({})).toBeNull();
  expect(flowLimitsOf({ maxConcurrent: 3 })).toEqual({ perSecond: null, maxConcurrent: 3 });
});

test("starts are spaced a little over 1/rate apart, booked up to the horizon ahead and no further", () => {
  let state = free;
  const starts: number[] = [];
  for (;;) {
    const start = flowStart(state, limits, 1000, false);
    if (!start) break;
    starts.push(start.startAtMs);
    state = { ...state, nextStartAtMs: start.nextStartAtMs };
  }
  expect(starts).toHaveLength(17);
  expect(starts.slice(0, 3).map(Math.round)).toEqual([1000, 1063, 1125]);
  expect(Math.max(...starts)).toBeLessThanOrEqual(1000 + FLOW_HORIZON_MS);
});

test("a full concurrency has no place; a newcomer goes behind deliveries already waiting, one let go from the queue does not", () => {
  expect([hasPlace(limits, 4), hasPlace(limits, 5)]).toEqual([true, false]);
  expect(flowStart({ ...free, othersWaiting: true }, limits, 0, false)).toBeNull();
  expect(flowStart({ ...free, othersWaiting: true }, limits, 0, true)?.startAtMs).toBe(0);
});

test("a drain round lets go a horizon's worth at the pace, and comes round before those have started", () => {
  expect(drainRound(limits)).toBe(20);
  expect(drainRound({ perSecond: 1, maxConcurrent: null })).toBe(1);
  expect(drainRound({ perSecond: 1000, maxConcurrent: null })).toBe(FLOW_DRAIN_MAX);
  expect(drainRound({ perSecond: null, maxConcurrent: 2 })).toBe(FLOW_DRAIN_MAX);
  expect(nextRoundMs(limits, 20)).toBe(750);
  expect(nextRoundMs({ perSecond: 1, maxConcurrent: null }, 1)).toBe(750);
  expect(nextRoundMs({ perSecond: 1000, maxConcurrent: null }, FLOW_DRAIN_MAX)).toBe(250);
});

test("a round its concurrency held short comes round sooner: by what it let go, not what it wanted", () => {
  expect(nextRoundMs(limits, 10)).toBe(375);
  expect(nextRoundMs(limits, 0)).toBe(250);
  expect(nextRoundMs({ perSecond: null, maxConcurrent: 5 }, 3)).toBe(250);
});

test("a round lets go no more than a second wave beyond what is on its way and in flight", () => {
  // Paced at 20 a second, 5 at once: the places and a second's worth of starts.
  expect(roomToRelease(limits, 20, { started: 0, onTheirWay: 0 })).toBe(20);
  expect(roomToRelease(limits, 20, { started: 5, onTheirWay: 18 })).toBe(2);
  const concurrencyOnly = { perSecond: null, maxConcurrent: 5 };
  expect(roomToRelease(concurrencyOnly, 200, { started: 0, onTheirWay: 0 })).toBe(10);
  expect(roomToRelease(concurrencyOnly, 200, { started: 5, onTheirWay: 3 })).toBe(2);
  const paceOnly = { perSecond: 20, maxConcurrent: null };
  expect(roomToRelease(paceOnly, 20, { started: 9, onTheirWay: 25 })).toBe(15);
  expect(roomToRelease(paceOnly, 20, { started: 0, onTheirWay: 40 })).toBe(0);
});
