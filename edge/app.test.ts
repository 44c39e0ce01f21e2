import { expect, test } from "vitest";
import { unkeyedDigest } from "../core/id-digest.ts";
import { createEdge } from "./app.ts";
import { endpointIn, hookEndpoint, liveKey, projectState } from "./steps/testing.ts";

/**
 * The edge must not reveal which check failed by how long it took: for every well-formed key of
 * a well-formed project it hashes once and looks up once, in the same order, before answering
 * the same 401. A key or project that cannot exist gets the same 401 before any work: it must
 * not fill the cache nor reach the control plane, and its shape is no secret to its sender.
 */
test("every unauthenticated call does the same work: one hash, one lookup, then 401", async () => {
  const real = `rk_live_${"r".repeat(43)}`;
  const work: string[] = [];
  const edge = createEdge({
    edgeDomain: "localhost:8787",
    state: {
      now: () => new Date(),
      async key(project, hash) {
        work.push(`lookup:${project}:${hash.length}`);
        // Only acme's real key exists; every other (project, hash) is unknown.
        return project === "acme" && hash[0] === 1 ? liveKey : null;
      },
      endpoint: endpointIn(projectState(hookEndpoint())),
    },
    hashKey: (plaintext) => {
      work.push("hash");
      return new Uint8Array(32).fill(plaintext === real ? 1 : 2);
    },
    temporal: {
      ready: async () => {},
      startDelivery: async () => "queued",
      claimSync: () => null,
      runSync: () => Promise.reject(new Error("no sync targets in this test")),
    },
    callTarget: () => Promise.reject(new Error("no targets in this test")),
    transform: () => Promise.reject(new Error("no transformations in this test")),
    logError: () => {},
    storeBody: () => Promise.reject(new Error("no large bodies in this test")),
    claimIdempotencyKey: async () => "claimed" as const,
    joinLane: async () => true,
    leaveLane: async () => {},
    reserveDeliveries: async () => null,
    releaseDeliveries: async () => {},
    recordStream: () => {},
    recordSkipped: async () => {},
    newRequestId: () => "req_1",
    idDigest: unkeyedDigest,
    maxBodyBytes: 1024,
  });
  const call = (host: string, authorization?: string) =>
    edge(
      new Request(`http://${host}/v1/hook`, {
        method: "POST",
        headers: { host, ...(authorization && { authorization }) },
        body: "{}",
      }),
      { remoteAddress: "127.0.0.1" },
    );

  const lookedUp = {
    "unknown key": () => call("acme.localhost", `Bearer rk_live_${"A".repeat(43)}`),
    "another project's key": () => call("other.localhost", `Bearer ${real}`),
    "unknown project": () => call("nope.localhost", `Bearer ${real}`),
  };
  const refusedAtOnce = {
    "no key": () => call("acme.localhost"),
    "malformed key": () => call("acme.localhost", "Bearer not-a-key"),
    "a key past its shape": () => call("acme.localhost", `Bearer ${real}${"A".repeat(16_000)}`),
    "a first label no project can have": () =>
      call(`${"x".repeat(64)}.localhost`, `Bearer ${real}`),
    "a first label with an underscore": () => call("ac_me.localhost", `Bearer ${real}`),
  };
  // The real key passes, so the failures below are the key's, not the fixture's.
  expect((await call("acme.localhost", `Bearer ${real}`)).status).toBe(202);
  for (const [cases, expected] of [
    [lookedUp, ["hash", "lookup"]],
    [refusedAtOnce, []],
  ] as const) {
    for (const [name, run] of Object.entries(cases)) {
      work.length = 0;
      const response = await run();
      expect(response.status, name).toBe(401);
      expect(await response.json(), name).toEqual({
        error: { code: "invalid_or_missing_key", message: "missing or invalid API key" },
      });
      expect(
        work.map((w) => w.split(":")[0]),
        name,
      ).toEqual(expected);
    }
  }
});
