import { expect, test } from "vitest";
import type { BatchReservation, CallReservation } from "../core/billing.ts";
import type { DeliveryBatch, DeliveryInput } from "../core/delivery.ts";
import { untraced } from "../core/tracing.ts";
import { type BatchedCall, batcher } from "./batcher.ts";

/** A stack whose first start the test answers (`answerFirst`); the rest answer at once. */
function fakeStack(options: { startFails?: boolean; tooFew?: string[] } = {}) {
  const trips: string[] = [];
  const released: string[] = [];
  let answerFirst: () => void = () => {};
  const firstAnswered = new Promise<void>((resolve) => {
    answerFirst = resolve;
  });
  const refusalOf = (requestId: string) =>
    options.tooFew?.includes(requestId) ? ({ code: "insufficient_credits" } as const) : null;
  const started = async (what: string) => {
    const first = trips.every((trip) => !trip.startsWith("start"));
    trips.push(what);
    if (first) await firstAnswered;
    if (options.startFails) throw new Error("Temporal is down");
  };
  const batch = batcher(
    {
      ready: async () => {},
      claimSync: () => null,
      runSync: async () => ({ kind: "busy" }),
      startDelivery: async (input: DeliveryInput) => {
        await started(`start ${input.requestId}`);
        return "queued";
      },
      startBatch: async (b: DeliveryBatch) => {
        await started(`batch ${b.requests.map((r) => r.requestId).join(",")}`);
      },
    },
    {
      reserveDeliveries: async (r: CallReservation) => {
        trips.push(`reserve ${r.requestId}`);
        return refusalOf(r.requestId);
      },
      reserveDeliveriesBatch: async (b: BatchReservation) => {
        trips.push(`reserve ${b.calls.map((c) => c.requestId).join(",")}`);
        return b.calls.map((c) => refusalOf(c.requestId));
      },
      releaseDeliveries: async (_, requestId) => {
        released.push(requestId);
      },
    },
    { maxItems: 32, logError: () => {} },
  );
  return { batch, trips, released, answerFirst: () => answerFirst() };
}

const callOf = (requestId: string): BatchedCall => ({
  input: {
    requestId,
    project: "acme",
    line: "l",
    endpoint: "e",
    keyMode: "live",
    receivedAt: new Date(0).toISOString(),
    headers: {},
    bodyBase64: "",
    bodyBytes: 0,
    targets: [],
  },
  trace: untraced,
  reservation: {
    project: "acme",
    pool: "live",
    requestId,
    holds: [{ targetId: "t", credits: 1 }],
    notBefore: null,
  },
});

test("calls arriving while one is in flight are reserved in one trip and started in one batch; a call that does not fit is refused, not started", async () => {
  const stack = fakeStack({ tooFew: ["r3"] });
  const first = stack.batch(callOf("r1"));
  await new Promise((resolve) => setTimeout(resolve, 0));
  const gathered = ["r2", "r3", "r4"].map((id) => stack.batch(callOf(id)));
  stack.answerFirst();

  expect(await first).toEqual({ accepted: "queued" });
  expect(await Promise.all(gathered)).toEqual([
    { accepted: "queued" },
    { refused: { code: "insufficient_credits" } },
    { accepted: "queued" },
  ]);
  expect(stack.trips).toEqual(["reserve r1", "start r1", "reserve r2,r3,r4", "batch r2,r4"]);
});

test("a batch whose start fails gives back what its calls reserved, and each caller is told", async () => {
  const stack = fakeStack({ startFails: true });
  const first = stack.batch(callOf("r1"));
  await new Promise((resolve) => setTimeout(resolve, 0));
  const gathered = ["r2", "r3"].map((id) => stack.batch(callOf(id)));
  stack.answerFirst();

  await expect(first).rejects.toThrow("Temporal is down");
  for (const call of gathered) await expect(call).rejects.toThrow("Temporal is down");
  expect(stack.released.sort()).toEqual(["r1", "r2", "r3"]);
});
