// biome-ignore lint/correctness/noNodejsModules: the test weighs the heap; the edge stays runtime-neutral
import { setFlagsFromString } from "node:v8";
// biome-ignore lint/correctness/noNodejsModules: as above, for a collection on demand
import { runInNewContext } from "node:vm";
import { expect, test } from "vitest";
import type { Endpoint, KeyRecord } from "../core/model.ts";
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
    endpointState: async () => ({ endpoint: null, signingKeys: [] }),
    async *watch() {
      for (;;) yield await new Promise<ChangeBatch>((resolve) => batches.push(resolve));
    },
    ack: async () => {},
    storeBody: async () => "",
    recordStream: async () => {},
    recordSkipped: async () => {},
    reserveDeliveries: async () => null,
    reserveDeliveriesBatch: async ({ calls }) => calls.map(() => null),
    acceptCalls: async ({ calls }) => ({ refusals: calls.map(() => null), accepted: true }),
    claimIdempotencyKey: async () => "claimed",
    joinLane: async () => true,
    leaveLane: async () => {},
    releaseDeliveries: async () => {},
    payloadKeys: async () => ({ keys: [], idKey: new Uint8Array() }),
    exchangeRateShares: async () => ({ fractions: [], liveEdges: 1 }),
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

test("a stopped edge gives its lease back at once and serves no key after", async () => {
  const { plane, state } = await started();
  const acks: number[] = [];
  plane.control.ack = async (_, __, leaseMs) => {
    acks.push(leaseMs);
  };
  await state.stop();
  expect(acks).toEqual([1]);
  await expect(state.key("acme", hash(4))).rejects.toMatchObject({ code: "unavailable" });
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
  await state.stop();
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
  await state.stop();
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
  await state.stop();
});

/** A project `acme` with endpoints `v1/a` and `v1/b`, each fetch counted by what it fetched. */
function routedPlane() {
  const plane = scripted();
  const fetched: string[] = [];
  let version = 1;
  const endpoint = (path: string, v: number): Endpoint => ({
    line: "v1",
    path,
    targets: [],
    ipAllowlist: [],
    schema: { type: "object" },
    rateLimit: null,
    ordering: "none",
    version: v,
    updatedAt: new Date(0),
  });
  let pendingEndpoint: (() => void) | undefined;
  plane.control.projectState = async () => {
    fetched.push("project");
    return {
      plan: "paid",
      defaultRateLimit: { requestsPerSecond: 1, burst: 1 },
      exhaustedPools: [],
      maxWaitingDeliveries: 10_000,
      heldDeliveriesFull: false,
      heldTargetIds: new Set(),
      projectRateLimit: { requestsPerSecond: 1, burst: 1 },
      signingKeys: new Map(),
      endpoints: new Map(["a", "b"].map((p) => [`v1/${p}`, endpoint(p, version)])),
    };
  };
  plane.control.endpointState = async (_project, line, path) => {
    fetched.push(`${line}/${path}`);
    const answer = path === "gone" ? null : endpoint(path, version);
    if (path === "slow") await new Promise<void>((resolve) => (pendingEndpoint = resolve));
    return { endpoint: answer, signingKeys: [] };
  };
  return {
    plane,
    fetched,
    bump: () => version++,
    finishSlow: () => pendingEndpoint?.(),
  };
}

async function startedOn(plane: ReturnType<typeof scripted>) {
  const state = new EdgeState({ control: plane.control, edgeId: "t", leaseMs: 60_000 });
  const ready = state.start();
  await plane.send([]);
  await ready;
  return state;
}

test("a change to one endpoint fetches that endpoint alone; the others stay the same objects", async () => {
  const { plane, fetched, bump } = routedPlane();
  const state = await startedOn(plane);
  const a = await state.endpoint("acme", "v1", "a");
  const b = await state.endpoint("acme", "v1", "b");
  expect(fetched).toEqual(["project"]);
  bump();
  await plane.send([{ project: "acme", kind: "endpoint", line: "v1", path: "a" }]);
  const changed = await state.endpoint("acme", "v1", "a");
  expect(changed?.endpoint.version).toBe(2);
  expect(changed?.endpoint).not.toBe(a?.endpoint);
  // The other endpoint is the same object, so its compiled schema (by object) is kept.
  expect((await state.endpoint("acme", "v1", "b"))?.endpoint).toBe(b?.endpoint);
  expect((await state.endpoint("acme", "v1", "a"))?.endpoint).toBe(changed?.endpoint);
  expect(fetched).toEqual(["project", "v1/a"]);

  // A created endpoint appears; a deleted one is gone; neither refetches the project.
  await plane.send([
    { project: "acme", kind: "endpoint", line: "v1", path: "new" },
    { project: "acme", kind: "endpoint", line: "v1", path: "gone" },
  ]);
  expect((await state.endpoint("acme", "v1", "new"))?.endpoint.path).toBe("new");
  expect(await state.endpoint("acme", "v1", "gone")).toBeNull();
  expect(await state.endpoint("acme", "v1", "nothing")).toBeNull();
  expect(fetched).toEqual(["project", "v1/a", "v1/new", "v1/gone"]);

  // A change to the project as a whole (a pool, the plan, a line) refetches it whole.
  await plane.send([{ project: "acme", kind: "routing" }]);
  await state.endpoint("acme", "v1", "b");
  expect(fetched.at(-1)).toBe("project");
  await state.stop();
});

test("an endpoint fetch raced by another change to it is answered but not kept", async () => {
  const { plane, fetched, finishSlow } = routedPlane();
  const state = await startedOn(plane);
  await state.endpoint("acme", "v1", "a");
  await plane.send([{ project: "acme", kind: "endpoint", line: "v1", path: "slow" }]);
  const first = state.endpoint("acme", "v1", "slow");
  await new Promise((resolve) => setTimeout(resolve, 1));
  await plane.send([{ project: "acme", kind: "endpoint", line: "v1", path: "slow" }]);
  finishSlow();
  expect((await first)?.endpoint.path).toBe("slow");
  const second = state.endpoint("acme", "v1", "slow");
  await new Promise((resolve) => setTimeout(resolve, 1));
  finishSlow();
  await second;
  expect(fetched.filter((f) => f === "v1/slow")).toHaveLength(2);
  await state.stop();
});
