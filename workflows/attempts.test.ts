import { describe, expect, test } from "vitest";
import { delivery, target } from "../test/workflow-worker.ts";
import {
  asyncDeliveries,
  FIRST_ATTEMPT_SLACK_MS,
  type FirstAttempt,
  rerunVerdict,
} from "./deliveries.ts";
import { FirstAttemptsInFlight } from "./first-attempts-in-flight.ts";

test("a first attempt run again while its first run is in flight joins it: the target is called once", async () => {
  const inFlight = new FirstAttemptsInFlight();
  const [atOrigin, atMirror] = asyncDeliveries(delivery([target("origin"), target("mirror")]));
  if (!atOrigin || !atMirror) throw new Error("two deliveries");
  const calls: string[] = [];
  let answer: (verdict: FirstAttempt) => void = () => {};
  const slow = (name: string) => () => {
    calls.push(name);
    return new Promise<FirstAttempt>((resolve) => {
      answer = resolve;
    });
  };

  const first = inFlight.run(atOrigin, slow("first run"));
  // Its workflow task timed out and ran again: the same delivery, while the first run waits.
  const again = inFlight.run(atOrigin, slow("run again"));
  const elsewhere = inFlight.run(atMirror, async () => {
    calls.push("another target");
    return { kind: "delivered", status: 202 };
  });
  answer({ kind: "delivered", status: 200 });
  expect(await again).toEqual({ kind: "delivered", status: 200 });
  expect(await first).toEqual({ kind: "delivered", status: 200 });
  expect(await elsewhere).toEqual({ kind: "delivered", status: 202 });
  expect(calls).toEqual(["first run", "another target"]);

  // Ended, a later run is a run of its own (the workflow's log check decides whether to make it).
  const later = inFlight.run(atOrigin, async () => {
    calls.push("later");
    return { kind: "delivered", status: 201 };
  });
  expect(await later).toEqual({ kind: "delivered", status: 201 });
  expect(calls).toEqual(["first run", "another target", "later"]);
});

test("a first run that throws fails its joiners too, and is forgotten", async () => {
  const inFlight = new FirstAttemptsInFlight();
  const [only] = asyncDeliveries(delivery([target("origin")]));
  if (!only) throw new Error("one delivery");
  let fail: (error: Error) => void = () => {};
  const first = inFlight.run(only, () => new Promise((_, reject) => (fail = reject)));
  const again = inFlight.run(only, async () => ({ kind: "delivered", status: 200 }));
  fail(new Error("the log is down"));
  await expect(first).rejects.toThrow("the log is down");
  await expect(again).rejects.toThrow("the log is down");
  expect(await inFlight.run(only, async () => ({ kind: "delivered", status: 200 }))).toEqual({
    kind: "delivered",
    status: 200,
  });
});

describe("a first attempt run again reads the log first", () => {
  const origin = target("origin");
  const started = 1_000_000;
  const inFlight = (workerId: string, workerAlive: boolean) => ({
    delivered: null,
    unended: { startedAtMs: started, workerId, workerAlive },
  });
  const endsBy = started + origin.timeoutSeconds * 1000 + FIRST_ATTEMPT_SLACK_MS;

  test("nothing logged, or a 2xx: make it, or answer delivered without a call", () => {
    expect(rerunVerdict(undefined, origin, "me", started)).toBeUndefined();
    expect(rerunVerdict({ delivered: 204, unended: null }, origin, "me", started)).toEqual({
      kind: "delivered",
      status: 204,
    });
  });

  test("in flight on another live worker: wait until it must have ended, then read the log again", () => {
    expect(rerunVerdict(inFlight("other", true), origin, "me", started + 2_000)).toEqual({
      kind: "busy",
      waitMs: endsBy - (started + 2_000),
      mayHaveLanded: true,
    });
    // Past its time, it is lost: make the attempt (the log marks the earlier one lost).
    expect(rerunVerdict(inFlight("other", true), origin, "me", endsBy)).toBeUndefined();
  });

  test("on a dead worker, or on this one (joined in process instead): make it", () => {
    expect(rerunVerdict(inFlight("other", false), origin, "me", started)).toBeUndefined();
    expect(rerunVerdict(inFlight("me", true), origin, "me", started)).toBeUndefined();
  });
});
