import { describe, expect, test } from "vitest";
import { GRACE_MS, keyAccepts, keyState } from "./keys.ts";

const expiresAt = new Date("2026-06-01T00:00:00.000Z");
const at = (offsetMs: number) => new Date(expiresAt.getTime() + offsetMs);

describe("keyState on an injected clock", () => {
  test.each([
    ["one millisecond before expiresAt", -1, "active"],
    ["at expiresAt", 0, "expired_grace"],
    ["at +24 h minus one millisecond", GRACE_MS - 1, "expired_grace"],
    ["at +24 h", GRACE_MS, "expired"],
  ] as const)("%s: %s", (_, offset, state) => {
    expect(keyState({ expiresAt, revokedAt: null }, at(offset))).toBe(state);
  });

  test("a key without expiry stays active", () => {
    expect(keyState({ expiresAt: null, revokedAt: null }, new Date("2999-01-01"))).toBe("active");
  });

  test("revocation wins over every time-based state, with no grace", () => {
    for (const offset of [-1, 0, GRACE_MS]) {
      expect(keyState({ expiresAt, revokedAt: at(-10) }, at(offset))).toBe("revoked");
    }
  });

  test("a revocation holds whatever the clock says: a clock behind revokedAt still refuses", () => {
    // An edge whose clock runs a minute behind the control plane's sees revokedAt in its future.
    const revokedAt = at(-GRACE_MS);
    expect(keyState({ expiresAt, revokedAt }, new Date(revokedAt.getTime() - 60_000))).toBe(
      "revoked",
    );
    expect(keyAccepts({ expiresAt: null, revokedAt }, new Date(0))).toBe(false);
  });

  test("calls are accepted while active or in grace, refused after", () => {
    expect(keyAccepts({ expiresAt, revokedAt: null }, at(GRACE_MS - 1))).toBe(true);
    expect(keyAccepts({ expiresAt, revokedAt: null }, at(GRACE_MS))).toBe(false);
  });
});
