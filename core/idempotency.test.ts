import { expect, test } from "vitest";
import { idDigest, unkeyedDigest } from "./id-digest.ts";
import { idempotencyKeyProblem, idempotent } from "./idempotency.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const call = {
  project: "acme",
  line: "v1",
  endpoint: "orders",
  apiKeyId: "key_live1",
  key: "order-1",
};

test("the request id follows the project, endpoint, API key and key; the tag follows the body", async () => {
  const first = await idempotent(call, bytes("{}"), unkeyedDigest);
  expect(first.requestId).toMatch(/^req_[A-Za-z0-9_-]{24}$/);
  expect(await idempotent(call, bytes("{}"), unkeyedDigest)).toEqual(first);
  const otherBody = await idempotent(call, bytes('{"a":1}'), unkeyedDigest);
  expect(otherBody.requestId).toBe(first.requestId);
  expect(otherBody.bodyTag).not.toBe(first.bodyTag);
  for (const change of [
    { project: "acme2" },
    { endpoint: "refunds" },
    { apiKeyId: "key_test1" },
    { key: "order-2" },
  ]) {
    expect(
      (await idempotent({ ...call, ...change }, bytes("{}"), unkeyedDigest)).requestId,
    ).not.toBe(first.requestId);
  }
  // Parts cannot run into each other: "ab"+"c" is not "a"+"bc".
  const joined = await idempotent(
    { ...call, line: "v1o", endpoint: "rders" },
    bytes("{}"),
    unkeyedDigest,
  );
  expect(joined.requestId).not.toBe(first.requestId);
});

test("keyed with the deployment's id key, the id and the tag are neither the unkeyed ones nor another key's", async () => {
  const unkeyed = await idempotent(call, bytes("{}"), unkeyedDigest);
  const keyed = await idempotent(call, bytes("{}"), await idDigest(new Uint8Array(32).fill(7)));
  const otherKey = await idempotent(call, bytes("{}"), await idDigest(new Uint8Array(32).fill(8)));
  expect(keyed.requestId).toMatch(/^req_[A-Za-z0-9_-]{24}$/);
  expect(keyed.requestId).not.toBe(unkeyed.requestId);
  expect(keyed.bodyTag).not.toBe(unkeyed.bodyTag);
  expect(otherKey.requestId).not.toBe(keyed.requestId);
  // No key configured (an empty one): the unkeyed digest.
  expect(await idempotent(call, bytes("{}"), await idDigest(new Uint8Array()))).toEqual(unkeyed);
});

test.each([
  ["order-1", null],
  ["k".repeat(255), null],
  ["", "Idempotency-Key must be 1 to 255 characters"],
  ["k".repeat(256), "Idempotency-Key must be 1 to 255 characters"],
  ["a\tb", "Idempotency-Key may not contain control characters"],
  ["a\u007fb", "Idempotency-Key may not contain control characters"],
])("Idempotency-Key %j: %s", (value, problem) => {
  expect(idempotencyKeyProblem(value)).toBe(problem);
});
