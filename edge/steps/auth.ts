import { RelayError } from "../../core/errors.ts";
import { type Cidr, clientAddress } from "../../core/ip.ts";
import { type KeyState, keyState } from "../../core/keys.ts";
import { isProjectSlug, type KeyRecord } from "../../core/model.ts";
import { isFireToken, verifyFireToken } from "../../core/schedules.ts";
import { isWellFormedApiKey } from "../../core/secrets.ts";
import type { EdgeDeps } from "../deps.ts";
import type { Authenticated, Step, With } from "../pipeline.ts";

type KeyHash = NonNullable<EdgeDeps["hashKey"]>;

/**
 * The caller's key, for the project named; a key in its grace period says so in the answer. A
 * schedule's fire carries a token of the control plane's instead (core/schedules.ts), and is
 * billed to the pool it names as a key of that mode would be.
 */
export function auth(
  state: EdgeDeps["state"],
  hashKey: KeyHash,
  trustedProxies: Cidr[],
  fireKey?: CryptoKey,
): Step<With<"project">, Authenticated> {
  return async function auth(envelope, next) {
    const { request, conn } = envelope;
    const authorization = request.headers.get("authorization");
    if (fireKey && authorization && isFireToken(authorization)) {
      const fire = await scheduleFire(fireKey, envelope, authorization, state.now());
      if (!fire) throw wrongKey();
      return next(Object.assign(envelope, fire));
    }
    const source = clientAddress(
      conn.remoteAddress,
      request.headers.get("x-forwarded-for"),
      trustedProxies,
    );
    const { key, state: keyStatus } = await authenticate(
      state,
      hashKey,
      envelope.project,
      authorization,
      source ? sourceOf(source) : conn.remoteAddress,
    );
    if (keyStatus === "expired_grace") {
      envelope.responseHeaders.set("x-relay-key-status", "expired_grace");
      if (key.successorUsable)
        envelope.responseHeaders.set("x-relay-key-successor-available", "true");
    }
    return next(Object.assign(envelope, { key }));
  };
}

/** A fire's schedule and its stand-in key; null: a fire's token that does not hold. */
async function scheduleFire(
  fireKey: CryptoKey,
  envelope: With<"project">,
  authorization: string,
  now: Date,
) {
  const { request, project } = envelope;
  const fire = await verifyFireToken(
    fireKey,
    authorization,
    {
      project,
      route: envelope.route ?? new URL(request.url).pathname,
      fireId: request.headers.get("idempotency-key"),
    },
    now,
  );
  if (!fire) return fire;
  const key: KeyRecord = {
    id: fire.scheduleId,
    project,
    mode: fire.mode,
    expiresAt: null,
    revokedAt: null,
    successorUsable: false,
  };
  return { key, scheduleId: fire.scheduleId };
}

/** Who a key lookup is counted against: an IPv4 address, or an IPv6 /64 (one subscriber's). */
export function sourceOf(address: { version: 4 | 6; value: bigint }): string {
  return address.version === 4 ? `4:${address.value}` : `6:${address.value >> 64n}`;
}

/** The one 401 for every caller the edge cannot tell is allowed (a Host off its domain too). */
export function wrongKey(): RelayError {
  return new RelayError("invalid_or_missing_key", "missing or invalid API key");
}

/**
 * Every failure answers the same 401: a missing, malformed or unknown key, a key of another
 * project, and an unknown project are indistinguishable to the caller. A well-formed key for a
 * well-formed project always costs one hash and one lookup, found or not; a key or project that
 * cannot exist is refused before either, so it fills no cache and reaches no control plane.
 */
async function authenticate(
  state: EdgeDeps["state"],
  hashKey: KeyHash,
  project: string,
  authorization: string | null,
  source: string,
): Promise<{ key: KeyRecord; state: KeyState }> {
  // The scheme is case-insensitive; two Authorization headers arrive joined and match nothing.
  const presented = /^bearer +(\S+)$/i.exec(authorization ?? "")?.[1] ?? "";
  if (!isWellFormedApiKey(presented) || !isProjectSlug(project)) throw wrongKey();
  const key = await state.key(project, await hashKey(presented), source);
  const keyStatus = key ? keyState(key, state.now()) : null;
  if (!key || keyStatus === null) throw wrongKey();
  if (keyStatus === "revoked") throw new RelayError("key_revoked", "this API key was revoked");
  if (keyStatus === "expired") throw new RelayError("key_expired", "this API key has expired");
  return { key, state: keyStatus };
}
