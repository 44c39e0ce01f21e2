import { CancelledFailure } from "@temporalio/common";
import { expect, test } from "vitest";
import { abortedUnlessEvicted } from "./batch-aborts.ts";

const cancelledFor = (reason: string) => {
  const controller = new AbortController();
  const signal = abortedUnlessEvicted(controller.signal);
  controller.abort(new CancelledFailure(reason));
  return signal;
};

test("a batch's attempt outlives its run's eviction (CANCELLED), not a timeout or the worker's shutdown", () => {
  expect(cancelledFor("CANCELLED").aborted).toBe(false);
  expect(cancelledFor("TIMED_OUT").aborted).toBe(true);
  expect(cancelledFor("WORKER_SHUTDOWN").reason).toBeInstanceOf(CancelledFailure);
});

test("an activity aborted before its attempt began aborts it at once, unless evicted", () => {
  const timedOut = new AbortController();
  timedOut.abort(new CancelledFailure("TIMED_OUT"));
  expect(abortedUnlessEvicted(timedOut.signal).aborted).toBe(true);
  const evicted = new AbortController();
  evicted.abort(new CancelledFailure("CANCELLED"));
  expect(abortedUnlessEvicted(evicted.signal).aborted).toBe(false);
});

test("an activity's attempts share one follower of its signal", () => {
  const activity = new AbortController();
  const first = abortedUnlessEvicted(activity.signal);
  expect(abortedUnlessEvicted(activity.signal)).toBe(first);
  activity.abort(new CancelledFailure("TIMED_OUT"));
  expect(first.aborted).toBe(true);
});
