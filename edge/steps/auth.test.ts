import { expect, test } from "vitest";
import { GRACE_MS } from "../../core/keys.ts";
import type { KeyRecord } from "../../core/model.ts";
import type { Envelope } from "../pipeline.ts";
import { auth } from "./auth.ts";
import { arrived, liveKey, passed, refusal } from "./testing.ts";

const now = new Date("2026-01-02T00:00:00Z");
const bearer = { authorization: `Bearer rk_live_${"k".repeat(43)}` };

function authWith(key: KeyRecord | null, sources: string[] = []) {
  const state = {
    now: () => now,
    key: async (_project: string, _hash: Uint8Array, source: string) => {
      sources.push(source);
      return key;
    },
    endpoint: async () => null,
  };
  return auth(state, () => new Uint8Array(32), []);
}

const forAcme = (envelope: Envelope) => Object.assign(envelope, { project: "acme" });

test("a key in its grace period passes, saying so and whether its successor is ready", async () => {
  const expiredAnHourAgo = { ...liveKey, expiresAt: new Date(now.getTime() - 3_600_000) };
  const next = passed<{ key: KeyRecord }>();
  const envelope = forAcme(arrived({ headers: bearer }));
  await authWith({ ...expiredAnHourAgo, successorUsable: true })(envelope, next);
  expect(next.handed[0]?.key.id).toBe("key_1");
  expect(envelope.responseHeaders.get("x-relay-key-status")).toBe("expired_grace");
  expect(envelope.responseHeaders.get("x-relay-key-successor-available")).toBe("true");

  const active = forAcme(arrived({ headers: bearer }));
  await authWith(liveKey)(active, next);
  expect([...active.responseHeaders]).toEqual([]);
});

test("revoked, expired past grace and unknown keys are refused, each with its own code", async () => {
  const cases: [KeyRecord | null, string][] = [
    [{ ...liveKey, revokedAt: now }, "key_revoked"],
    [{ ...liveKey, expiresAt: new Date(now.getTime() - GRACE_MS - 1) }, "key_expired"],
    [null, "invalid_or_missing_key"],
  ];
  for (const [key, code] of cases) {
    const refused = await refusal(authWith(key)(forAcme(arrived({ headers: bearer })), passed()));
    expect(refused.code).toBe(code);
  }
  const noKey = await refusal(authWith(liveKey)(forAcme(arrived()), passed()));
  expect(noKey.code).toBe("invalid_or_missing_key");
});

test("lookups are counted per IPv4 address and per IPv6 /64", async () => {
  const sources: string[] = [];
  const step = authWith(liveKey, sources);
  for (const address of ["192.0.2.1", "2001:db8::1", "2001:db8::2", "2001:db8:0:1::1"]) {
    await step(forAcme(arrived({ headers: bearer }, address)), passed());
  }
  expect(sources[0]).toBe(`4:${0xc0000201}`);
  expect(sources[1]).toBe(sources[2]);
  expect(sources[3]).not.toBe(sources[1]);
});
