import { expect, test } from "vitest";
import {
  emptyLane,
  headsGoing,
  joinLane,
  laneSize,
  laneWorkflowId,
  leaveLane,
  nextToGo,
  orderingKeyProblem,
} from "./lanes.ts";

test("a key is at most 128 characters of visible ASCII; empty is the default lane", () => {
  expect(orderingKeyProblem("")).toBeNull();
  expect(orderingKeyProblem("order-42/eu:~!")).toBeNull();
  expect(orderingKeyProblem("~".repeat(128))).toBeNull();
  expect(orderingKeyProblem("x".repeat(129))).toMatch(/at most 128/);
  for (const bad of ["a b", "caf\u00e9", "tab\there", "nul\u0000"]) {
    expect(orderingKeyProblem(bad)).toMatch(/visible ASCII/);
  }
});

test("a lane's id names its project and hashes its endpoint and key: short, stable, distinct", async () => {
  const hook = { line: "v1", path: "hook" };
  const id = await laneWorkflowId("acme", hook, "order-1");
  expect(id).toMatch(/^lane:acme:[0-9a-f]{32}$/);
  expect(await laneWorkflowId("acme", hook, "order-1")).toBe(id);
  expect(await laneWorkflowId("acme", hook, "order-2")).not.toBe(id);
  expect(await laneWorkflowId("acme", { line: "v1", path: "other" }, "order-1")).not.toBe(id);
  expect(await laneWorkflowId("acme", hook, "")).not.toBe(id);
});

test("per target, one at a time goes, in join order; done lets the next go", () => {
  let lane = joinLane(emptyLane(), "r1", ["a", "b"]);
  lane = joinLane(lane, "r2", ["a", "b"]);
  lane = joinLane(lane, "r3", ["a"]);
  const first = nextToGo(lane);
  expect(first.go).toEqual([
    { targetId: "a", requestId: "r1" },
    { targetId: "b", requestId: "r1" },
  ]);
  lane = first.state;
  expect(nextToGo(lane).go).toEqual([]); // nothing more while the heads are going
  // r1 is done with b only: b's next goes, a's head still holds a.
  lane = leaveLane(lane, "r1", "b");
  const second = nextToGo(lane);
  expect(second.go).toEqual([{ targetId: "b", requestId: "r2" }]);
  lane = leaveLane(second.state, "r1", "a");
  expect(nextToGo(lane).go).toEqual([{ targetId: "a", requestId: "r2" }]);
  expect(laneSize(lane)).toBe(3);
});

test("a second join of the same request is no-op; a done for one not queued changes nothing", () => {
  let lane = joinLane(emptyLane(), "r1", ["a"]);
  lane = joinLane(lane, "r2", ["a"]);
  lane = joinLane(lane, "r1", ["a"]);
  expect(lane.queues.a).toEqual(["r1", "r2"]);
  expect(leaveLane(lane, "r9", "a")).toBe(lane);
  expect(leaveLane(lane, "r1", "b")).toBe(lane);
});

test("a request leaving from behind the head (cancelled while it waited) keeps the head going", () => {
  let lane = nextToGo(joinLane(joinLane(emptyLane(), "r1", ["a"]), "r2", ["a"])).state;
  lane = joinLane(lane, "r3", ["a"]);
  lane = leaveLane(lane, "r2", "a");
  expect(headsGoing(lane)).toEqual([{ targetId: "a", requestId: "r1" }]);
  expect(nextToGo(lane).go).toEqual([]);
  lane = leaveLane(lane, "r1", "a");
  expect(nextToGo(lane).go).toEqual([{ targetId: "a", requestId: "r3" }]);
});

test("an emptied lane has no queues left, and its state is plain JSON (carried across continue-as-new)", () => {
  let lane = nextToGo(joinLane(emptyLane(), "r1", ["a"])).state;
  lane = leaveLane(lane, "r1", "a");
  expect(lane).toEqual(emptyLane());
  expect(laneSize(lane)).toBe(0);
  const carried = nextToGo(joinLane(emptyLane(), "r1", ["a", "b"])).state;
  expect(JSON.parse(JSON.stringify(carried))).toEqual(carried);
});
