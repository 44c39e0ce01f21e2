/** The project key policy (spec section 2): what lifetime a new key gets, and who may choose it. */
import { RelayError } from "./errors.ts";
import type { Policy, Role } from "./model.ts";

export const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The lifetime in days of a key minted by `role`: `requested` when given (null meaning "never
 * expires"), else the policy default. Editors are bound by the policy; owners ignore the cap.
 */
export function keyLifetimeDays(
  policy: Policy,
  role: Role,
  requested: number | null | undefined,
): number | null {
  const ttlDays = requested === undefined ? policy.defaultKeyTtlDays : requested;
  if (role === "owner") return ttlDays;
  if (ttlDays === null && !policy.editorsMayCreateNonExpiringKeys) {
    throw new RelayError("policy_violation", "editors may not create keys that never expire");
  }
  if (ttlDays !== null && policy.maxKeyTtlDays !== null && ttlDays > policy.maxKeyTtlDays) {
    throw new RelayError(
      "policy_violation",
      `ttlDays ${ttlDays} exceeds the project's maximum of ${policy.maxKeyTtlDays} days`,
    );
  }
  return ttlDays;
}

export function expiryFor(ttlDays: number | null, now: Date): Date | null {
  return ttlDays === null ? null : new Date(now.getTime() + ttlDays * DAY_MS);
}

/**
 * A successor keeps its predecessor's lifetime, within policy: an editor's rotation is clamped
 * to the cap, and a non-expiring key rotated by a bound editor gets the default (or the cap).
 */
export function rotationLifetimeDays(
  policy: Policy,
  role: Role,
  predecessorDays: number | null,
): number | null {
  if (role === "owner") return predecessorDays;
  const cap = policy.maxKeyTtlDays;
  if (predecessorDays === null) {
    return policy.editorsMayCreateNonExpiringKeys ? null : (policy.defaultKeyTtlDays ?? cap ?? 365);
  }
  return withinCap(policy, predecessorDays);
}

/**
 * An auto-rotated successor keeps its predecessor's lifetime, clamped to the cap: the daily
 * rotation acts for no member, so an owner's freedom from the cap is not passed on to it. (Only
 * expiring keys are rotated; a key that never expires has nothing to clamp.)
 */
export function autoRotationLifetimeDays(
  policy: Policy,
  predecessorDays: number | null,
): number | null {
  return predecessorDays === null ? null : withinCap(policy, predecessorDays);
}

function withinCap(policy: Policy, days: number): number {
  return policy.maxKeyTtlDays !== null && days > policy.maxKeyTtlDays ? policy.maxKeyTtlDays : days;
}

/** A key's lifetime in whole days, rounded up, from its creation to its expiry. */
export function lifetimeDays(createdAt: Date, expiresAt: Date | null): number | null {
  if (!expiresAt) return null;
  return Math.max(1, Math.ceil((expiresAt.getTime() - createdAt.getTime()) / DAY_MS));
}
