import { expect, test } from "vitest";
import type { BatchReservation, CallReservation, CallsAcceptance } from "../core/billing.ts";
import type { KeyClaimOutcome } from "../core/idempotency.ts";
import { untraced } from "../core/tracing.ts";
import type { BatchedCall } from "./batched-calls.ts";
import { batcher } from "./batcher.ts";

/**
 * A stack whose first start the test answers (`answerFirst`); the rest answer at once. Its
 * control plane accepts a group unless one of its calls is in `tooFew`.
 */
function fakeStack(
  options: {
    startFails?: boolean;
    tooFew?: string[];
    acceptHangs?: boolean;
    storeFails?: boolean;
    /** Keys claimed before, by request id, and what claiming them again finds. */
    claimedBefore?: Record<string, KeyClaimOutcome>;
    /** How long a batch waits for the calls behind it to join it (none by default). */
    lingerMs?: number;
    /** Its acceptances of a group joining a kept start find that start gone. */
    joinsFail?: boolean;
    /** Its acceptances of a group joining a kept start are never answered. */
    joinsHang?: boolean;
  } = {},
) {
  const trips: string[] = [];
  const released: string[] = [];
  let answerFirst: () => void = () => {};
  const firstAnswered = new Promise<void>((resolve) => {
    answerFirst = resolve;
  });
  const refusalOf = (requestId: string) =>
    options.tooFew?.includes(requestId) ? ({ code: "insufficient_credits" } as const) : null;
  const idsOf = (calls: { requestId: string }[]) => calls.map((c) => c.requestId).join(",");
  const batch = batcher(
    {
      admit: async () => () => {},
      prepareStart: async (_, requests) => ({
        workflowId: idsOf(requests),
        body: new Uint8Array(),
        async send() {
          const first = trips.every((trip) => !trip.startsWith("start"));
          trips.push(`start ${idsOf(requests)}`);
          if (first) await firstAnswered;
          if (options.startFails) throw new Error("Temporal is down");
        },
      }),
    },
    {
      acceptCalls: async (a: CallsAcceptance) => {
        const bodies = a.bodies?.length ? ` storing ${idsOf(a.bodies)}` : "";
        const joining = a.joins ? ` joining ${a.joins}` : "";
        trips.push(
          `accept ${idsOf(a.calls)}${bodies}${joining}${a.started.length ? ` (${a.started} made)` : ""}`,
        );
        if (options.acceptHangs || (a.joins && options.joinsHang)) {
          await new Promise(() => {});
        }
        if (a.joins && options.joinsFail) {
          return { refusals: a.calls.map(() => null), accepted: false };
        }
        const claims = a.calls.map((c) => options.claimedBefore?.[c.requestId] ?? "claimed");
        if (claims.some((claim) => claim !== "claimed")) {
          return { refusals: a.calls.map(() => null), accepted: false, claims };
        }
        const refusals = a.calls.map((c) => refusalOf(c.requestId));
        return { refusals, accepted: refusals.every((r) => r === null) };
      },
      reserveDeliveries: async (r: CallReservation) => {
        trips.push(`reserve ${r.requestId}`);
        return refusalOf(r.requestId);
      },
      reserveDeliveriesBatch: async (b: BatchReservation) => {
        trips.push(`reserve ${idsOf(b.calls)}`);
        return b.calls.map((c) => refusalOf(c.requestId));
      },
      releaseDeliveries: async (_, requestId) => {
        released.push(requestId);
      },
      storeBody: async (_, requestId) => {
        trips.push(`store ${requestId}`);
        if (options.storeFails) throw new Error("the control plane is down");
        return requestId;
      },
    },
    { maxItems: 32, maxStoredBytes: 1000, lingerMs: options.lingerMs ?? 0, logError: () => {} },
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

/** A call whose body of `bytes` travels by reference. */
const largeCallOf = (requestId: string, bytes: number): BatchedCall => {
  const call = callOf(requestId);
  return {
    ...call,
    input: { ...call.input, bodyRef: requestId },
    storedBody: new Uint8Array(bytes),
  };
};

/** A call with an Idempotency-Key. */
const keyedCallOf = (requestId: string): BatchedCall => ({
  ...callOf(requestId),
  claim: { requestId, bodyTag: "tag" },
});

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

test("a call is answered once it is accepted, before its start is made; the next goes at once, and calls arriving while it is accepted go together next, confirming the starts before them", async () => {
  const stack = fakeStack();
  expect(await stack.batch(callOf("r1"))).toEqual({ accepted: "queued" });
  expect(stack.trips).toEqual(["accept r1", "start r1"]); // the start not answered yet

  const calls = ["r2", "r3", "r4"].map((id) => stack.batch(callOf(id)));
  expect(await Promise.all(calls)).toEqual(calls.map(() => ({ accepted: "queued" })));
  await tick();
  expect(stack.trips).toEqual([
    "accept r1",
    "start r1",
    "accept r2",
    "start r2",
    "accept r3,r4 (r2 made)",
    "start r3,r4",
  ]);
  stack.answerFirst();
  await tick();
  expect(await stack.batch(callOf("r5"))).toEqual({ accepted: "queued" });
  expect(stack.trips.at(-2)).toBe("accept r5 (r3,r4,r1 made)");
});

test("a group with a call that does not fit is not accepted: the others are started before they are answered, the one refused", async () => {
  const stack = fakeStack({ tooFew: ["r3"] });
  stack.answerFirst();
  const calls = ["r2", "r3", "r4"].map((id) => stack.batch(callOf(id)));

  expect(await Promise.all(calls)).toEqual([
    { accepted: "queued" },
    { refused: { code: "insufficient_credits" } },
    { accepted: "queued" },
  ]);
  expect(stack.trips).toEqual(["accept r2", "start r2", "accept r3,r4 (r2 made)", "start r4"]);
});

test("an accepted start that fails is left to the sweep: its callers keep their 202, and later groups are started before they are answered until a start succeeds", async () => {
  const stack = fakeStack({ startFails: true });
  stack.answerFirst();
  expect(await stack.batch(callOf("r1"))).toEqual({ accepted: "queued" });
  await tick();

  await expect(stack.batch(callOf("r2"))).rejects.toThrow("Temporal is down");
  expect(stack.trips).toEqual(["accept r1", "start r1", "reserve r2", "start r2"]);
  expect(stack.released).toEqual(["r2"]); // what a start that failed before its answer held
});

test("an acceptance not answered in time: the group is reserved, started and then answered, and the next groups skip the acceptance for a while", async () => {
  const stack = fakeStack({ acceptHangs: true });
  stack.answerFirst();
  expect(await stack.batch(callOf("r1"))).toEqual({ accepted: "queued" });
  expect(await stack.batch(callOf("r2"))).toEqual({ accepted: "queued" });
  expect(stack.trips).toEqual(["accept r1", "reserve r1", "start r1", "reserve r2", "start r2"]);
});

/**
 * r1 alone, r2 to r4 gathering behind it as it is accepted, so it waits for them; r5 and r6 sent
 * once those are answered. Answers the trips made.
 */
async function joinBehindABatch(stack: ReturnType<typeof fakeStack>): Promise<string[]> {
  stack.answerFirst();
  const calls = ["r1", "r2", "r3", "r4"].map((id) => stack.batch(callOf(id)));
  expect(await Promise.all(calls)).toEqual(calls.map(() => ({ accepted: "queued" })));
  const behind = [stack.batch(callOf("r5")), stack.batch(callOf("r6"))];
  expect(await Promise.all(behind)).toEqual(behind.map(() => ({ accepted: "queued" })));
  await new Promise((resolve) => setTimeout(resolve, 100));
  return stack.trips;
}

test("a batch at most half full waits for the calls gathering behind it, which join it: their acceptance replaces its kept start, and one start carries both groups", async () => {
  expect(await joinBehindABatch(fakeStack({ lingerMs: 50 }))).toEqual([
    "accept r1",
    "accept r2,r3,r4 joining r1",
    "accept r5,r6 joining r1,r2,r3,r4",
    // After 50 ms: no call came to join it again.
    "start r1,r2,r3,r4,r5,r6",
  ]);
});

test("calls that could not join a batch (its kept start gone) go on in a start of their own, and the batch is made as it was kept", async () => {
  expect(await joinBehindABatch(fakeStack({ lingerMs: 50, joinsFail: true }))).toEqual([
    "accept r1",
    "accept r2,r3,r4 joining r1",
    "start r1",
    "start r2,r3,r4",
    "accept r5 (r1 made)",
    "accept r6 joining r5",
    "start r5",
    "start r6",
  ]);
});

test("a join whose acceptance is not answered in time leaves the batch to the sweep: had it committed, the kept start carries the joining calls, and the start as kept before would be confirmed in its place", async () => {
  expect(await joinBehindABatch(fakeStack({ lingerMs: 50, joinsHang: true }))).toEqual([
    "accept r1",
    "accept r2,r3,r4 joining r1",
    // r1 is not made here; the calls after take the older path for a while.
    "reserve r2,r3,r4",
    "start r2,r3,r4",
    "reserve r5",
    "start r5",
    "reserve r6",
    "start r6",
  ]);
}, 5000);

test("a lone call answered while calls gather behind it is left open for them: they join it, its own start becoming a batch's", async () => {
  const stack = fakeStack({ lingerMs: 50 });
  stack.answerFirst();
  const calls = ["r1", "r2", "r3"].map((id) => stack.batch(callOf(id)));
  expect(await Promise.all(calls)).toEqual(calls.map(() => ({ accepted: "queued" })));
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(stack.trips).toEqual(["accept r1", "accept r2,r3 joining r1", "start r1,r2,r3"]);
});

test("a lone call with nothing gathering behind it waits for nothing: its start is made once it is answered", async () => {
  const stack = fakeStack({ lingerMs: 50 });
  expect(await stack.batch(callOf("r1"))).toEqual({ accepted: "queued" });
  expect(stack.trips).toEqual(["accept r1", "start r1"]);
});

test("a mirror's lone async targets, their caller waiting for its sync target, wait for calls to join them; none coming, they start after the wait", async () => {
  const stack = fakeStack({ lingerMs: 50 });
  stack.answerFirst();
  const mirrored = (id: string): BatchedCall => ({ ...callOf(id), mirrored: true });
  expect(await stack.batch(mirrored("r1"))).toEqual({ accepted: "queued" });
  expect(stack.trips).toEqual(["accept r1"]);
  await new Promise((resolve) => setTimeout(resolve, 10));
  expect(await stack.batch(mirrored("r2"))).toEqual({ accepted: "queued" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(await stack.batch(mirrored("r3"))).toEqual({ accepted: "queued" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(stack.trips).toEqual([
    "accept r1",
    "accept r2 joining r1",
    "start r1,r2",
    "accept r3 (r1,r2 made)",
    "start r3",
  ]);
});

test("bodies that travel by reference are stored in their group's acceptance, a group holding one inbound body's size of them at most", async () => {
  const stack = fakeStack();
  stack.answerFirst();
  const calls = [
    stack.batch(callOf("r1")),
    stack.batch(largeCallOf("r2", 600)),
    stack.batch(largeCallOf("r3", 300)),
    stack.batch(largeCallOf("r4", 600)),
  ];
  expect(await Promise.all(calls)).toEqual(calls.map(() => ({ accepted: "queued" })));
  await tick();
  expect(stack.trips).toEqual([
    "accept r1",
    "accept r2,r3 storing r2,r3",
    "start r1",
    "start r2,r3",
    "accept r4 storing r4 (r2,r3,r1 made)",
    "start r4",
  ]);
});

test("on the older path a body is stored before its start; a call whose body could not be stored is not queued, and gives its reservation back", async () => {
  const stack = fakeStack({ acceptHangs: true, storeFails: true });
  stack.answerFirst();
  expect(await stack.batch(largeCallOf("r1", 10))).toEqual({ unstored: true });
  expect(stack.released).toEqual(["r1"]);
  expect(await stack.batch(callOf("r2"))).toEqual({ accepted: "queued" });
  expect(stack.trips).toEqual([
    "accept r1 storing r1",
    "reserve r1",
    "store r1",
    "reserve r2",
    "start r2",
  ]);
});

test("keys claimed before: a repeat is answered as its batched first call was, a reuse refused, a key whose first call went alone goes alone, and the others are accepted without them", async () => {
  const stack = fakeStack({ claimedBefore: { r2: "repeat", r3: "reused", r4: "own_workflow" } });
  stack.answerFirst();
  const calls = [
    stack.batch(callOf("r0")),
    stack.batch(keyedCallOf("r1")),
    stack.batch(keyedCallOf("r2")),
    stack.batch(keyedCallOf("r3")),
    stack.batch(keyedCallOf("r4")),
    stack.batch(callOf("r5")),
  ];
  expect(await Promise.all(calls)).toEqual([
    { accepted: "queued" },
    { accepted: "queued" },
    { accepted: "queued" },
    { reused: true },
    { alone: true },
    { accepted: "queued" },
  ]);
  expect(stack.trips).toEqual([
    "accept r0",
    "start r0",
    "accept r1,r2,r3,r4,r5 (r0 made)",
    "accept r1,r5",
    "start r1,r5",
  ]);
});

test("a call repeating a key of its group is answered as the group's first call of it: the same body alike, another one 422", async () => {
  const stack = fakeStack();
  stack.answerFirst();
  const reusing = { ...keyedCallOf("r1"), claim: { requestId: "r1", bodyTag: "other" } };
  const calls = [
    stack.batch(callOf("r0")),
    stack.batch(keyedCallOf("r1")),
    stack.batch(keyedCallOf("r1")),
    stack.batch(reusing),
  ];
  expect(await Promise.all(calls)).toEqual([
    { accepted: "queued" },
    { accepted: "queued" },
    { accepted: "queued" },
    { reused: true },
  ]);
  expect(stack.trips).toEqual(["accept r0", "start r0", "accept r1 (r0 made)", "start r1"]);
});

test("on the older path a call with an Idempotency-Key goes alone: its key is claimed with a kept start only", async () => {
  const stack = fakeStack({ acceptHangs: true });
  stack.answerFirst();
  const calls = [
    stack.batch(keyedCallOf("r1")),
    stack.batch(keyedCallOf("r2")),
    stack.batch(callOf("r3")),
  ];
  expect(await Promise.all(calls)).toEqual([
    { alone: true },
    { alone: true },
    { accepted: "queued" },
  ]);
  expect(stack.trips.filter((trip) => !trip.startsWith("accept"))).toEqual([
    "reserve r3",
    "start r3",
  ]);
});

test("a fan-out's calls count by their deliveries: a batch holds no more first attempts than a batch of single calls", async () => {
  const stack = fakeStack();
  stack.answerFirst();
  const fanOut = (requestId: string): BatchedCall => {
    const call = callOf(requestId);
    const target = {
      ...{ id: "t", name: "t", targetUrl: "http://t", deliveryMode: "async" as const },
      ...{ timeoutSeconds: 30, headers: {} },
    };
    const targets = Array.from({ length: 12 }, (_, i) => ({ ...target, id: `t${i}` }));
    return { ...call, input: { ...call.input, targets } };
  };
  const calls = ["r0", "r1", "r2", "r3", "r4"].map((id) => stack.batch(fanOut(id)));
  expect(await Promise.all(calls)).toEqual(calls.map(() => ({ accepted: "queued" })));
  await tick();
  // 32 deliveries a batch at most: two calls of 12 targets, not all four waiting.
  expect(stack.trips.filter((trip) => trip.startsWith("start"))).toEqual([
    "start r0",
    "start r1,r2",
    "start r3,r4",
  ]);
});
