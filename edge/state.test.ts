// biome-ignore lint/correctness/noNodejsModules: the test weighs the heap; the edge stays runtime-neutral
import { setFlagsFromString } from "node:v8";
// biome-ignore lint/correctness/noNodejsModules: as above, for a collection on demand
import { runInNewContext } from "node:vm";
import { expect, test } from "vitest";
import type { KeyRecord } from "../core/model.ts";
import type { ChangeBatch, ControlPlane } from "./control.ts";
import { EdgeState } from "./state.ts";

const hash = (byte: number) => new Uint8Array(32).fill(byte);
const key = (id: string, revoked: boolean): KeyRecord & { keyHash: Uint8Array } => ({
  id,
  project: "acme",
  mode: "live",
  expiresAt: null,
  revokedAt: revoked ? new Date(0) : null,
  successorUsable: false,
  keyHash: hash(id === "a" ? 1 : 2),
});

/** A control plane whose change stream and lookups the test drives by hand. */
function scripted() {
  const batches: ((batch: ChangeBatch) => void)[] = [];
  let pendingLookup: ((record: KeyRecord | null) => void) | undefined;
  let lookups = 0;
  const control: ControlPlane = {
    resolveKey: () => {
      lookups++;
      return new Promise((resolve) => {
        pendingLookup = resolve;
      });
    },
    projectState: async () => null,
    async *watch() {
      for (;;) yield await new Promise<ChangeBatch>((resolve) => batches.push(resolve));
    },
    ack: async () => {},
    storeBody: async () => "",
    recordStream: async () => {},
    reserveDeliveries: async () => null,
    releaseDeliveries: async () => {},
  };
  let sequence = 0n;
  return {
    control,
    lookups: () => lookups,
    answer: (record: KeyRecord | null) => pendingLookup?.(record),
    async send(changes: ChangeBatch["changes"]) {
      while (batches.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      batches.shift()?.({ changes, headSequence: ++sequence, clockOffsetMs: 0 });
      await new Promise((resolve) => setTimeout(resolve, 1));
    },
  };
}

async function started() {
  const plane = scripted();
  const state = new EdgeState({ control: plane.control, edgeId: "t", leaseMs: 60_000 });
  const ready = state.start();
  await plane.send([]);
  await ready;
  return { plane, state };
}

test("a lookup that raced a change to its own key is answered but not cached", async () => {
  const { plane, state } = await started();
  const lookup = state.key("acme", hash(1));
  await plane.send([{ project: "acme", kind: "key", key: key("a", true) }]); // revoked meanwhile
  plane.answer(key("a", false)); // the answer predates the revocation
  expect((await lookup)?.revokedAt).toBeNull();
  const next = state.key("acme", hash(1));
  plane.answer(key("a", true));
  expect((await next)?.revokedAt).not.toBeNull();
  expect(plane.lookups()).toBe(2);
  state.stop();
});

test("a change to another key does not keep a lookup out of the cache", async () => {
  const { plane, state } = await started();
  const lookup = state.key("acme", hash(1));
  await plane.send([{ project: "acme", kind: "key", key: key("b", true) }]);
  plane.answer(key("a", false));
  await lookup;
  await state.key("acme", hash(1)); // from the cache: no second lookup
  expect(plane.lookups()).toBe(1);
  state.stop();
});

test("a control plane that cannot answer a miss is 503 unavailable, not 500", async () => {
  const { plane, state } = await started();
  plane.control.resolveKey = () => Promise.reject(new Error("connection refused"));
  await expect(state.key("acme", hash(3))).rejects.toMatchObject({ code: "unavailable" });
  state.stop();
});

test("one source's misses are capped; its cached keys and other sources still pass", async () => {
  const plane = scripted();
  let now = 0;
  const state = new EdgeState({
    control: plane.control,
    edgeId: "t",
    leaseMs: 60_000,
    monotonic: () => now,
    missesPerSource: { requestsPerSecond: 1, burst: 2 },
  });
  const ready = state.start();
  await plane.send([]);
  await ready;
  const miss = (byte: number, source: string) => {
    const found = state.key("acme", hash(byte), source);
    plane.answer(null);
    return found;
  };
  await miss(10, "flood");
  await miss(11, "flood");
  await expect(state.key("acme", hash(12), "flood")).rejects.toMatchObject({
    code: "rate_limited",
  });
  expect(plane.lookups()).toBe(2); // the refused miss never reached the control plane
  await miss(13, "someone else");
  expect(await state.key("acme", hash(10), "flood")).toBeNull(); // cached: no budget needed
  now += 1000; // one miss earned back
  await miss(14, "flood");
  expect(plane.lookups()).toBe(4);
  state.stop();
});

test("lookups in flight are capped, so misses cannot crowd out the lease's acks", async () => {
  const plane = scripted();
  const state = new EdgeState({
    control: plane.control,
    edgeId: "t",
    leaseMs: 60_000,
    maxLookupsInFlight: 1,
  });
  const ready = state.start();
  await plane.send([]);
  await ready;
  const first = state.key("acme", hash(20), "a");
  await expect(state.key("acme", hash(21), "b")).rejects.toMatchObject({ code: "unavailable" });
  plane.answer(null);
  await first;
  expect(plane.lookups()).toBe(1);
  state.stop();
});

test("concurrent callers of one uncached key share one lookup, charged once", async () => {
  const { plane, state } = await started();
  const calls = Array.from({ length: 50 }, () => state.key("acme", hash(30), "one source"));
  plane.answer(key("a", false));
  expect((await Promise.all(calls)).every((found) => found?.id === "a")).toBe(true);
  expect(plane.lookups()).toBe(1);
  state.stop();
});

test("a cached miss weighs its id and little more: the id is one flat string", async () => {
  setFlagsFromString("--expose-gc");
  const collect = runInNewContext("gc") as () => void;
  const control = {
    ...scripted().control,
    resolveKey: async () => null,
    async *watch() {
      yield { changes: [], headSequence: 1n, clockOffsetMs: 0 };
      await new Promise(() => {});
    },
  };
  const unlimited = { requestsPerSecond: 1e9, burst: 1e9 };
  const state = new EdgeState({
    control,
    edgeId: "t",
    leaseMs: 60_000,
    missesPerSource: unlimited,
  });
  await state.start();
  const misses = 5000;
  const hashes = Array.from({ length: misses }, () => crypto.getRandomValues(new Uint8Array(32)));
  collect();
  const before = process.memoryUsage().heapUsed;
  for (const [i, keyHash] of hashes.entries()) await state.key(`nope-${i}`, keyHash, "one source");
  collect();
  const perMiss = (process.memoryUsage().heapUsed - before) / misses;
  // A 72-character id and its map slot take about 150 bytes; an id concatenated a byte at a
  // time keeps its 64 pieces, about 1.6 KB (bench/memory.ts's heap diff found them).
  expect(perMiss).toBeLessThan(500);
  state.stop();
});
