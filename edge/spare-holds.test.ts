import { afterEach, expect, test, vi } from "vitest";
import type { CallReservation, ReservationRefusal } from "../core/billing.ts";
import { type SpareHoldOptions, type SpareHolds, spareHolds } from "./spare-holds.ts";

const hold = { targetId: "t", credits: 1 };
const tooFew = { code: "insufficient_credits" } as const;
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A control plane that answers each reservation with `answer` and records what went back. */
function controlPlane(answer: () => Promise<ReservationRefusal | null> = async () => null) {
  const reserved: CallReservation[] = [];
  const released: string[] = [];
  let ids = 0;
  const options: SpareHoldOptions = {
    reserve: (r) => {
      reserved.push(r);
      return answer();
    },
    release: async (_, requestId) => {
      released.push(requestId);
    },
    newRequestId: () => `req_${++ids}`,
    logError: () => {},
  };
  return { options, reserved, released };
}

/** A stream call of `project`'s: takes its spare, and its answer begins at once. */
async function streamCall(spares: SpareHolds, project = "acme", target = hold) {
  const taken = await spares.take(project, "live", target);
  taken.holdNext();
  return taken.requestId;
}

afterEach(() => {
  vi.useRealTimers();
});

test("a target's first stream call finds no spare and has one held for the next, which takes it and has the next held", async () => {
  const cp = controlPlane();
  const spares = spareHolds(cp.options);
  expect(await streamCall(spares)).toBeNull();
  await settled();
  expect(cp.reserved).toEqual([
    { project: "acme", pool: "live", requestId: "req_1", holds: [hold], notBefore: null },
  ]);
  expect(await streamCall(spares)).toBe("req_1");
  await settled();
  expect(await streamCall(spares)).toBe("req_2");
  // Another pool or target is another spare.
  expect((await spares.take("acme", "test", hold)).requestId).toBeNull();
  expect(await streamCall(spares, "acme", { targetId: "u", credits: 1 })).toBeNull();
  await spares.stop();
});

test("the next spare is held only once the call's answer has begun", async () => {
  const cp = controlPlane();
  const spares = spareHolds(cp.options);
  await streamCall(spares);
  await settled();
  const taken = await spares.take("acme", "live", hold);
  expect(taken.requestId).toBe("req_1");
  await settled();
  expect(cp.reserved).toHaveLength(1);
  // Meanwhile another call to the target reserves its own.
  expect((await spares.take("acme", "live", hold)).requestId).toBeNull();
  taken.holdNext();
  taken.holdNext();
  await settled();
  expect(cp.reserved).toHaveLength(2);
  expect(await streamCall(spares)).toBe("req_2");
  await spares.stop();
});

test("calls arriving while the spare is being held wait for it: the first takes it, the others reserve their own", async () => {
  let answer: (refusal: null) => void = () => {};
  const cp = controlPlane(() => new Promise((resolve) => (answer = resolve)));
  const spares = spareHolds(cp.options);
  await streamCall(spares);
  const waiting = [streamCall(spares), streamCall(spares)];
  answer(null);
  expect(await Promise.all(waiting)).toEqual(["req_1", null]);
  await spares.stop();
});

test("a pool that cannot fit a spare leaves its target without one, and the next call tries again", async () => {
  const cp = controlPlane(async () => tooFew);
  const spares = spareHolds(cp.options);
  await streamCall(spares);
  await settled();
  expect(await streamCall(spares)).toBeNull();
  await settled();
  expect(cp.reserved).toHaveLength(2);
  await spares.stop();
});

test("a control plane that does not answer leaves the target without a spare", async () => {
  const cp = controlPlane(async () => {
    throw new Error("unavailable");
  });
  const spares = spareHolds(cp.options);
  await streamCall(spares);
  await settled();
  expect(await streamCall(spares)).toBeNull();
  await spares.stop();
});

test("a spare unused for the idle time goes back; one in use stays", async () => {
  vi.useFakeTimers();
  const cp = controlPlane();
  const spares = spareHolds({ ...cp.options, idleMs: 60_000 });
  await streamCall(spares, "acme");
  await streamCall(spares, "quiet");
  await vi.advanceTimersByTimeAsync(40_000);
  expect(await streamCall(spares, "acme")).toBe("req_1");
  await vi.advanceTimersByTimeAsync(40_000);
  expect(cp.released).toEqual(["req_2"]); // quiet's, 80 s unused
  expect(await streamCall(spares, "acme")).toBe("req_3");
  await spares.stop();
});

test("a spare whose call never began its answer is forgotten after the idle time, and the target gets a new one", async () => {
  vi.useFakeTimers();
  const cp = controlPlane();
  const spares = spareHolds({ ...cp.options, idleMs: 60_000 });
  await streamCall(spares);
  await vi.advanceTimersByTimeAsync(1_000);
  const hung = await spares.take("acme", "live", hold);
  expect(hung.requestId).toBe("req_1");
  await vi.advanceTimersByTimeAsync(80_000);
  hung.holdNext(); // too late: its spare was forgotten
  expect(cp.reserved).toHaveLength(1);
  expect(await streamCall(spares)).toBeNull();
  await vi.advanceTimersByTimeAsync(0);
  expect(await streamCall(spares)).toBe("req_2");
  await spares.stop();
});

test("stopping gives every spare back, and one held after the stop goes back as it lands", async () => {
  const pending: ((refusal: null) => void)[] = [];
  const cp = controlPlane(() => new Promise((resolve) => pending.push(resolve)));
  const spares = spareHolds(cp.options);
  await streamCall(spares, "acme");
  await streamCall(spares, "other");
  pending.shift()?.(null);
  await settled();
  await spares.stop();
  expect(cp.released).toEqual(["req_1"]);
  pending.shift()?.(null);
  await settled();
  expect(cp.released).toEqual(["req_1", "req_2"]);
  expect(await streamCall(spares, "acme")).toBeNull();
  expect(cp.reserved).toHaveLength(2);
});

test("spares are bounded per project and in all", async () => {
  const cp = controlPlane();
  const spares = spareHolds({ ...cp.options, maxPerProject: 2, maxSpares: 3 });
  for (const target of ["a", "b", "c"])
    await streamCall(spares, "acme", { targetId: target, credits: 1 });
  for (const target of ["a", "b"])
    await streamCall(spares, "other", { targetId: target, credits: 1 });
  await settled();
  expect(cp.reserved.map((r) => `${r.project}/${r.holds[0]?.targetId}`)).toEqual([
    "acme/a",
    "acme/b",
    "other/a",
  ]);
  await spares.stop();
});
