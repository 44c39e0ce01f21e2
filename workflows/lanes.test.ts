/**
 * Ordered delivery's workflow side (./lanes.ts) on mocked activities (test/workflow-worker.ts,
 * whose lanes keep store/lanes.ts's rules in memory): requests deliver one at a time per target,
 * in the order they joined, a retried head holding the next behind it; a parked request is told
 * its turn. The real stack's test is test/ordered-delivery.test.ts. `RECORD_HISTORIES=1` records a
 * history for replay.test.ts.
 */
import { expect, test, vi } from "vitest";
import type { DeliveryInput } from "../core/delivery.ts";
import {
  attemptsOf,
  callsOf,
  delivery,
  env,
  joinLaneAsEdge,
  nextId,
  parkedUnder,
  passTurns,
  recordHistory,
  script,
  start,
  target,
  taskQueue,
  withMockedWorker,
} from "../test/workflow-worker.ts";
import { goSignal } from "./signals.ts";
import type { deliverBatch } from "./workflows.ts";

withMockedWorker();

/**
 * A batch of one ordered request per key, each parked in its batch behind an earlier request of
 * its key that another batch carries (`ahead`: pass their turns to let the batch's go).
 */
async function batchBehind(keys: string[]) {
  const origin = target("origin");
  const ahead = keys.map((key) => ({ key, laneId: nextId("lane"), id: nextId("ahead") }));
  const requests: DeliveryInput[] = ahead.map(({ key, laneId }) => ({
    ...delivery([origin]),
    ordering: { laneId, key, joinedAtEdge: true },
  }));
  for (const [i, { laneId, id }] of ahead.entries()) {
    joinLaneAsEdge(laneId, id, [origin.id]);
    joinLaneAsEdge(laneId, requests[i]?.requestId ?? "", [origin.id]);
  }
  const batch = await env.client.workflow.start<typeof deliverBatch>("deliverBatch", {
    taskQueue,
    workflowId: nextId("batch"),
    args: [{ project: "acme", requests }],
  });
  await vi.waitFor(() => {
    for (const r of requests) expect(parkedUnder(r.requestId)).toBe(batch.workflowId);
  });
  return { origin, ahead, requests, batch };
}

test("requests deliver one at a time per target, in join order; a retried head holds the next, and each passes its turn on", async () => {
  const origin = target("origin");
  script.set(origin.id, [{ status: 503 }, { status: 200 }]);
  const laneId = nextId("lane");
  const requests = [1, 2, 3].map(() => ({
    ...delivery([origin]),
    ordering: { laneId, key: "customer-42", joinedAtEdge: true },
  }));
  const handles = [];
  for (const request of requests) {
    joinLaneAsEdge(laneId, request.requestId, [origin.id]);
    handles.push(await start(request));
  }
  expect(await Promise.all(handles.map((h) => h.result()))).toEqual([
    "delivered",
    "delivered",
    "delivered",
  ]);
  const attempts = requests.map((r) => attemptsOf(r.requestId));
  for (const each of attempts) expect(each.map((a) => a.status)).toEqual([503, 200]);
  // Each one's first attempt came after the one before it was delivered.
  for (const [i, each] of attempts.entries()) {
    const before = attempts[i - 1]?.at(-1);
    if (before) expect(each[0]?.at).toBeGreaterThanOrEqual(before.at);
  }
  const left = callsOf("leaveLane").map((c) => c.args[1]);
  expect(left).toEqual(requests.map((r) => r.requestId));
  const [, second] = handles;
  if (second) await recordHistory(second, "ordered-parked-then-turn");
});

test("a batch whose requests wait behind other batches' attempts the turns told it a few apart in one activity", async () => {
  // Three keys, each with an earlier request a batch of its own carries, then one of this batch.
  const { origin, ahead, requests, batch } = await batchBehind(["a", "b", "c"]);
  // The requests ahead end one after another, and each tells the batch its turn came.
  for (const { laneId, id } of ahead) {
    await passTurns(env.client, [{ laneId, requestId: id, targetIds: [origin.id] }]);
  }
  expect(await batch.result()).toBe(0);
  const ours = new Set(requests.map((r) => r.requestId));
  const rounds = callsOf("releasedAttemptsOfBatch")
    .map((c) => (c.args[0] as { request: DeliveryInput }[]).map((r) => r.request.requestId))
    .filter((ids) => ids.some((id) => ours.has(id)));
  expect(rounds).toEqual([requests.map((r) => r.requestId)]);
  for (const r of requests) expect(attemptsOf(r.requestId).map((a) => a.status)).toEqual([200]);
  await recordHistory(batch, "batch-lanes-gathered");
});

/**
 * A batch of two keys' requests, each behind another batch's: the first key's turn is passed and
 * its request delivered; `passSecond` passes the other's.
 */
async function oneToldOneUntold() {
  const { origin, ahead, requests, batch } = await batchBehind(["a", "b"]);
  const [first, second] = ahead;
  const [told, untold] = requests;
  if (!first || !second || !told || !untold) throw new Error("two keys");
  const pass = ({ laneId, id }: { laneId: string; id: string }) =>
    passTurns(env.client, [{ laneId, requestId: id, targetIds: [origin.id] }]);
  await pass(first);
  await vi.waitFor(() => expect(attemptsOf(told.requestId).map((a) => a.status)).toEqual([200]), {
    timeout: 10_000,
  });
  return { origin, told, untold, batch, passSecond: () => pass(second) };
}

test("a batch told one turn while another of its requests waits untold attempts it once the turns are gathered, not at its next wake", async () => {
  // Its next wake is 10 minutes off (the untold one's longest wait for its turn).
  const { untold, batch, passSecond } = await oneToldOneUntold();
  expect(attemptsOf(untold.requestId)).toEqual([]);
  await passSecond();
  expect(await batch.result()).toBe(0);
});

test("a batch told again a turn it already took (a tell sent twice) waits on quietly for its others' turns", async () => {
  const { origin, told, untold, batch, passSecond } = await oneToldOneUntold();
  // The sweep of owed turns tells it again (control/lane-sweep.ts): the told one is gone.
  const turn = { targetId: origin.id, requestId: told.requestId };
  await batch.signal(goSignal, { ...turn, told: [turn] });
  await new Promise((resolve) => setTimeout(resolve, 2000));
  // Its wait is timed by the untold one's deadline (10 minutes), not woken every millisecond.
  const { events } = await batch.fetchHistory();
  const timers = (events ?? []).flatMap((e) => e.timerStartedEventAttributes ?? []);
  expect(Number(timers.at(-1)?.startToFireTimeout?.seconds)).toBeGreaterThan(60);
  await passSecond();
  expect(await batch.result()).toBe(0);
  expect(attemptsOf(untold.requestId).map((a) => a.status)).toEqual([200]);
});
