import { expect, test } from "vitest";
import { laneIdOf, orderingKeyProblem } from "./lanes.ts";

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
  const id = await laneIdOf("acme", hook, "order-1");
  expect(id).toMatch(/^lane:acme:[0-9a-f]{32}$/);
  expect(await laneIdOf("acme", hook, "order-1")).toBe(id);
  expect(await laneIdOf("acme", hook, "order-2")).not.toBe(id);
  expect(await laneIdOf("acme", { line: "v1", path: "other" }, "order-1")).not.toBe(id);
  expect(await laneIdOf("acme", hook, "")).not.toBe(id);
});
