/**
 * Ordered delivery's workflow side (./lanes.ts) on mocked activities (test/workflow-worker.ts,
 * whose lanes keep store/lanes.ts's rules in memory): requests deliver one at a time per target,
 * in the order they joined, a retried head holding the next behind it; a parked request is told
 * its turn. The real stack's test is test/ordered-delivery.test.ts. `RECORD_HISTORIES=1` records a
 * history for replay.test.ts.
 */
import { expect, test } from "vitest";
import {
  attemptsOf,
  callsOf,
  delivery,
  joinLaneAsEdge,
  nextId,
  recordHistory,
  script,
  start,
  target,
  withMockedWorker,
} from "../test/workflow-worker.ts";

withMockedWorker();

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
