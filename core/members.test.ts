import { describe, expect, test } from "vitest";
import { RelayError } from "./errors.ts";
import { MAX_MEMBER_TOKEN_DAYS, memberTokenAccepted, memberTokenExpiry } from "./members.ts";
import { DAY_MS } from "./policy.ts";

const now = new Date("2026-06-01T00:00:00.000Z");
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);

describe("memberTokenExpiry", () => {
  test("no expiry stays none; a future one within the bound is kept", () => {
    expect(memberTokenExpiry(null, now)).toBeNull();
    expect(memberTokenExpiry(at(1), now)).toEqual(at(1));
    expect(memberTokenExpiry(at(MAX_MEMBER_TOKEN_DAYS * DAY_MS), now)).toEqual(
      at(MAX_MEMBER_TOKEN_DAYS * DAY_MS),
    );
  });

  test.each([
    ["now", 0],
    ["the past", -1],
    ["past the bound", MAX_MEMBER_TOKEN_DAYS * DAY_MS + 1],
  ])("%s is a bad request", (_, offset) => {
    expect(() => memberTokenExpiry(at(offset), now)).toThrow(RelayError);
  });
});

describe("memberTokenAccepted on an injected clock", () => {
  test("until one millisecond before the expiry, and never after", () => {
    const member = { expiresAt: at(0) };
    expect(memberTokenAccepted(member, at(-1))).toBe(true);
    expect(memberTokenAccepted(member, at(0))).toBe(false);
    expect(memberTokenAccepted({ expiresAt: null }, at(100 * 365 * DAY_MS))).toBe(true);
  });
});
