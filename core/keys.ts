/** Key states as inbound callers observe them (spec section 3), on an injected clock. */
import type { KeyRecord } from "./model.ts";

export const GRACE_MS = 24 * 60 * 60 * 1000;

export type KeyState = "active" | "expired_grace" | "expired" | "revoked";

export function keyState(key: Pick<KeyRecord, "expiresAt" | "revokedAt">, now: Date): KeyState {
  // Revocation is a fact the control plane recorded, not a time: a clock running behind the one
  // that set revokedAt (an edge's, say) must not see the key alive.
  if (key.revokedAt) return "revoked";
  if (!key.expiresAt) return "active";
  const sinceExpiry = now.getTime() - key.expiresAt.getTime();
  if (sinceExpiry < 0) return "active";
  return sinceExpiry < GRACE_MS ? "expired_grace" : "expired";
}

/** A key whose calls are accepted now. */
export function keyAccepts(key: Pick<KeyRecord, "expiresAt" | "revokedAt">, now: Date): boolean {
  const state = keyState(key, now);
  return state === "active" || state === "expired_grace";
}
