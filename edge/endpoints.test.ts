import { expect, test } from "vitest";
import type { Endpoint } from "../core/model.ts";
import { EndpointRuntime } from "./endpoints.ts";

const endpoint = (path: string, ipAllowlist: string[] = []): Endpoint => ({
  line: "v1",
  path,
  targets: [],
  ipAllowlist,
  schema: null,
  rateLimit: null,
  ordering: "none",
  version: 1,
  updatedAt: new Date(0),
});

test("a recreated endpoint (its version back at 1) is compiled from its own config", () => {
  const runtime = new EndpointRuntime();
  const before = endpoint("z");
  expect(runtime.compile(before).allowlist).toEqual([]);
  expect(runtime.compile(before)).toBe(runtime.compile(before)); // once per endpoint
  expect(runtime.compile(endpoint("z", ["203.0.113.0/24"])).allowlist).toHaveLength(1);
});

test("rate buckets are bounded: the least recently used is dropped and starts full", () => {
  const runtime = new EndpointRuntime({ maxBuckets: 2 });
  const limit = { requestsPerSecond: 0.001, burst: 1 };
  const take = (path: string) => runtime.rate("acme", endpoint(path), limit, 0, true).allowed;
  expect([take("a"), take("a")]).toEqual([true, false]);
  expect([take("b"), take("c")]).toEqual([true, true]); // "a" was least recently used
  expect(take("a")).toBe(true);
  expect(take("c")).toBe(false); // still held
});

test("an unchanged schema is not compiled again when its project's routing changes", () => {
  const runtime = new EndpointRuntime();
  const withSchema = (path: string) => ({ ...endpoint(path), schema: { required: ["a"] } });
  const first = runtime.compile(withSchema("z")).validate;
  expect(first?.({})).toHaveLength(1);
  expect(runtime.compile(withSchema("z")).validate).toBe(first);
});

test("with shares, the bucket holds this edge's share of the limit; the header states the endpoint's", () => {
  const counted: boolean[] = [];
  const runtime = new EndpointRuntime({
    shares: { fraction: () => 0.25, count: (_, __, allowed) => counted.push(allowed) },
  });
  const limit = { requestsPerSecond: 4, burst: 8 };
  const take = (nowMs: number) => runtime.rate("acme", endpoint("z"), limit, nowMs, true);
  expect([take(0), take(0), take(0)].map((d) => d.allowed)).toEqual([true, true, false]);
  expect(take(0)).toMatchObject({ limit: 8, remaining: 0 });
  // A token a second: the share of 4 a second.
  expect(take(999).allowed).toBe(false);
  expect(take(1_000).allowed).toBe(true);
  expect(counted).toEqual([true, true, false, false, false, true]);
});
