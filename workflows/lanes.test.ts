/**
 * Ordered delivery's workflows (./lanes.ts) on mocked activities (test/workflow-worker.ts): a
 * lane lets its requests go one at a time per target, in the order they joined, a retried head
 * holding the next behind it. The joins come from the test, as the edge's do (the mocked
 * workflow's own join does nothing). The real stack's test is test/ordered-delivery.test.ts.
 * `RECORD_HISTORIES=1` records both workflows' histories for replay.test.ts.
 */
import { expect, test } from "vitest";
import { LANE_JOIN_SIGNAL, LANE_WORKFLOW } from "../core/lanes.ts";
import {
  attemptsOf,
  delivery,
  env,
  nextId,
  recordHistory,
  script,
  start,
  target,
  taskQueue,
  withMockedWorker,
} from "../test/workflow-worker.ts";

withMockedWorker();

test("a lane lets one request at a time go per target, in join order; a retried head holds the next", async () => {
  const origin = target("origin");
  script.set(origin.id, [{ status: 503 }, { status: 200 }]);
  const laneId = nextId("lane");
  const requests = [1, 2, 3].map(() => ({
    ...delivery([origin]),
    ordering: { laneId, key: "customer-42" },
  }));
  const handles = [];
  for (const request of requests) {
    handles.push(await start(request));
    await env.client.workflow.signalWithStart(LANE_WORKFLOW, {
      workflowId: laneId,
      taskQueue,
      args: [{ project: "acme" }],
      signal: LANE_JOIN_SIGNAL,
      signalArgs: [{ requestId: request.requestId, targetIds: [origin.id] }],
    });
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
  await recordHistory(env.client.workflow.getHandle(laneId), "lane-three-in-order");
  const [first] = handles;
  if (first) await recordHistory(first, "ordered-retried-in-turn");
});
