import { expect, test } from "vitest";
import type { BatchReservation, CallReservation, ReservationRefusal } from "../core/billing.ts";
import { groupedReservations } from "./reservations.ts";

/** A control plane whose answers the test gives, one pending call at a time. */
function heldControlPlane() {
  const sent: (CallReservation | BatchReservation)[] = [];
  const pending: { answer: (value: unknown) => void; fail: (error: unknown) => void }[] = [];
  const held = <T>(request: CallReservation | BatchReservation) => {
    sent.push(request);
    return new Promise<T>((answer, fail) => {
      pending.push({ answer: answer as (value: unknown) => void, fail });
    });
  };
  return {
    sent,
    control: {
      reserveDeliveries: (r: CallReservation) => held<ReservationRefusal | null>(r),
      reserveDeliveriesBatch: (b: BatchReservation) => held<(ReservationRefusal | null)[]>(b),
    },
    /** Answers the oldest call still pending. */
    answer(value: unknown) {
      pending.shift()?.answer(value);
      return flushed();
    },
    fail(error: unknown) {
      pending.shift()?.fail(error);
      return flushed();
    },
  };
}

const flushed = () => new Promise((resolve) => setTimeout(resolve, 0));
const tooFew = { code: "insufficient_credits" } as const;

const call = (requestId: string, over: Partial<CallReservation> = {}): CallReservation => ({
  project: "acme",
  pool: "live",
  requestId,
  holds: [{ targetId: "t", credits: 1 }],
  notBefore: null,
  ...over,
});

test("a lone call reserves at once through the single call", async () => {
  const cp = heldControlPlane();
  const reserve = groupedReservations(cp.control);
  const answer = reserve(call("r1"));
  expect(cp.sent).toEqual([call("r1")]);
  await cp.answer(null);
  expect(await answer).toBeNull();
});

test("calls arriving while one is answered go next as one batch, in order, each with its answer", async () => {
  const cp = heldControlPlane();
  const reserve = groupedReservations(cp.control);
  const first = reserve(call("r1"));
  const gathered = ["r2", "r3", "r4"].map((id) => reserve(call(id)));
  expect(cp.sent).toHaveLength(1);

  await cp.answer(null);
  expect(await first).toBeNull();
  expect(cp.sent[1]).toEqual({
    project: "acme",
    pool: "live",
    calls: ["r2", "r3", "r4"].map((requestId) => ({
      requestId,
      holds: [{ targetId: "t", credits: 1 }],
    })),
  });
  await cp.answer([null, tooFew, null]);
  expect(await Promise.all(gathered)).toEqual([null, tooFew, null]);
  // The lane is gone: the next call goes alone again.
  reserve(call("r5"));
  expect(cp.sent[2]).toEqual(call("r5"));
});

test("a group at its cap goes at once, without waiting for the one in flight", async () => {
  const cp = heldControlPlane();
  const reserve = groupedReservations(cp.control, 2);
  reserve(call("r1"));
  reserve(call("r2"));
  expect(cp.sent).toHaveLength(1);
  reserve(call("r3"));
  expect(cp.sent).toHaveLength(2);
  expect((cp.sent[1] as BatchReservation).calls.map((c) => c.requestId)).toEqual(["r2", "r3"]);
});

test("other projects and pools do not wait; delayed calls and calls holding nothing go alone", async () => {
  const cp = heldControlPlane();
  const reserve = groupedReservations(cp.control);
  reserve(call("r1"));
  reserve(call("r2", { pool: "test" }));
  reserve(call("r3", { project: "other" }));
  reserve(call("r4", { notBefore: new Date(0) }));
  reserve(call("r5", { holds: [] }));
  expect(cp.sent.map((r) => (r as CallReservation).requestId)).toEqual([
    "r1",
    "r2",
    "r3",
    "r4",
    "r5",
  ]);
});

test("a control plane that fails fails each call of the group (the caller goes on unreserved)", async () => {
  const cp = heldControlPlane();
  const reserve = groupedReservations(cp.control);
  const first = reserve(call("r1")).catch((e: unknown) => e);
  const gathered = ["r2", "r3"].map((id) => reserve(call(id)).catch((e: unknown) => e));
  const down = new Error("control plane down");
  await cp.fail(down);
  expect(await first).toBe(down);
  await cp.fail(down);
  expect(await Promise.all(gathered)).toEqual([down, down]);
});
