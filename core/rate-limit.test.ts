import { expect, test } from "vitest";
import { type Bucket, takeToken } from "./rate-limit.ts";

const limit = { requestsPerSecond: 10, burst: 20 };

test("a full bucket allows `burst` calls at once, then refuses with Retry-After", () => {
  let bucket: Bucket | undefined;
  for (let i = 0; i < 20; i++) {
    const decision = takeToken(bucket, limit, 0);
    expect(decision.allowed).toBe(true);
    expect(decision.remaining).toBe(19 - i);
    bucket = decision.bucket;
  }
  const refused = takeToken(bucket, limit, 0);
  expect(refused).toMatchObject({
    allowed: false,
    remaining: 0,
    retryAfterSeconds: 1,
    resetSeconds: 2,
  });
});

test("tokens come back at requestsPerSecond and never beyond burst", () => {
  const empty: Bucket = { tokens: 0, updatedAtMs: 0 };
  expect(takeToken(empty, limit, 99).allowed).toBe(false);
  expect(takeToken(empty, limit, 100)).toMatchObject({ allowed: true, remaining: 0 });
  expect(takeToken(empty, limit, 60_000)).toMatchObject({
    allowed: true,
    remaining: 19,
    resetSeconds: 1,
  });
});

test("a slow limit gives a Retry-After of several seconds", () => {
  const slow = { requestsPerSecond: 0.25, burst: 1 };
  const first = takeToken(undefined, slow, 0);
  expect(takeToken(first.bucket, slow, 0)).toMatchObject({ allowed: false, retryAfterSeconds: 4 });
});
