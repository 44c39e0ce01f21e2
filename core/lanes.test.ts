import { expect, test } from "vitest";
import { idDigest, unkeyedDigest } from "./id-digest.ts";
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
  const id = await laneIdOf("acme", hook, "order-1", unkeyedDigest);
  expect(id).toMatch(/^lane:acme:[0-9a-f]{32}$/);
  expect(await laneIdOf("acme", hook, "order-1", unkeyedDigest)).toBe(id);
  expect(await laneIdOf("acme", hook, "order-2", unkeyedDigest)).not.toBe(id);
  expect(await laneIdOf("acme", { line: "v1", path: "other" }, "order-1", unkeyedDigest)).not.toBe(
    id,
  );
  expect(await laneIdOf("acme", hook, "", unkeyedDigest)).not.toBe(id);
});

test("keyed with the deployment's id key, a lane's id is not the unkeyed one", async () => {
  const hook = { line: "v1", path: "hook" };
  const keyed = await laneIdOf("acme", hook, "order-1", await idDigest(new Uint8Array(32).fill(7)));
  expect(keyed).toMatch(/^lane:acme:[0-9a-f]{32}$/);
  expect(keyed).not.toBe(await laneIdOf("acme", hook, "order-1", unkeyedDigest));
});
