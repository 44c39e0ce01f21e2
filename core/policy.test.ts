import { describe, expect, test } from "vitest";
import { RelayError } from "./errors.ts";
import type { Policy } from "./model.ts";
import {
  autoRotationLifetimeDays,
  DAY_MS,
  expiryFor,
  keyLifetimeDays,
  lifetimeDays,
  rotationLifetimeDays,
} from "./policy.ts";

const strict: Policy = {
  defaultKeyTtlDays: 30,
  maxKeyTtlDays: 90,
  editorsMayCreateNonExpiringKeys: false,
};
const open: Policy = {
  defaultKeyTtlDays: null,
  maxKeyTtlDays: null,
  editorsMayCreateNonExpiringKeys: true,
};

function violation(run: () => unknown): string | null {
  try {
    run();
    return null;
  } catch (error) {
    return error instanceof RelayError ? error.code : "not a RelayError";
  }
}

describe("keyLifetimeDays", () => {
  test("absent ttlDays takes the policy default; no default means no expiry", () => {
    expect(keyLifetimeDays(strict, "editor", undefined)).toBe(30);
    expect(keyLifetimeDays(open, "editor", undefined)).toBeNull();
  });

  test("editors are capped at maxKeyTtlDays, inclusive", () => {
    expect(keyLifetimeDays(strict, "editor", 90)).toBe(90);
    expect(violation(() => keyLifetimeDays(strict, "editor", 91))).toBe("policy_violation");
  });

  test("editors may not mint non-expiring keys when the policy says so", () => {
    expect(violation(() => keyLifetimeDays(strict, "editor", null))).toBe("policy_violation");
    expect(keyLifetimeDays(open, "editor", null)).toBeNull();
  });

  test("an absent ttl with no default is a non-expiring key, refused to a bound editor", () => {
    const noDefault = { ...strict, defaultKeyTtlDays: null };
    expect(violation(() => keyLifetimeDays(noDefault, "editor", undefined))).toBe(
      "policy_violation",
    );
  });

  test("owners ignore the cap and the non-expiring rule", () => {
    expect(keyLifetimeDays(strict, "owner", 3650)).toBe(3650);
    expect(keyLifetimeDays(strict, "owner", null)).toBeNull();
  });
});

test("expiryFor adds whole days to the injected now", () => {
  const now = new Date("2026-01-01T12:00:00Z");
  expect(expiryFor(2, now)?.getTime()).toBe(now.getTime() + 2 * DAY_MS);
  expect(expiryFor(null, now)).toBeNull();
});

describe("rotationLifetimeDays", () => {
  test("a successor keeps the predecessor's lifetime", () => {
    expect(rotationLifetimeDays(strict, "editor", 60)).toBe(60);
    expect(rotationLifetimeDays(open, "editor", null)).toBeNull();
  });
  test("an editor's rotation is clamped to the cap; owners keep theirs", () => {
    expect(rotationLifetimeDays(strict, "editor", 365)).toBe(90);
    expect(rotationLifetimeDays(strict, "owner", 365)).toBe(365);
  });
  test("a bound editor rotating a non-expiring key gets the default", () => {
    expect(rotationLifetimeDays(strict, "editor", null)).toBe(30);
    expect(rotationLifetimeDays(strict, "owner", null)).toBeNull();
  });
});

test("lifetimeDays rounds up to whole days", () => {
  const created = new Date("2026-01-01T00:00:00Z");
  expect(lifetimeDays(created, new Date(created.getTime() + 30 * DAY_MS))).toBe(30);
  expect(lifetimeDays(created, new Date(created.getTime() + 30 * DAY_MS + 1))).toBe(31);
  expect(lifetimeDays(created, null)).toBeNull();
});

test("an auto-rotated successor keeps the lifetime within the cap, whoever minted the key", () => {
  expect(autoRotationLifetimeDays(strict, 365)).toBe(90);
  expect(autoRotationLifetimeDays(strict, 60)).toBe(60);
  expect(autoRotationLifetimeDays(open, 365)).toBe(365);
});
