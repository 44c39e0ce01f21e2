/** Which headers cross the relay: caller to target, and target back to caller. */
import { CDN_LOOP, markedCdnLoop } from "./loop.ts";

/** The connection's own headers (RFC 9110 7.6.1): they never cross a proxy either way. */
const HOP_BY_HOP = ["connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"];

/**
 * Never forwarded to a target: credentials, the caller's framing, hop-by-hop headers, and the
 * signature headers Relay sets.
 */
const DROPPED_TO_TARGET = new Set([
  ...HOP_BY_HOP,
  "authorization",
  "proxy-authorization",
  "cookie",
  "host",
  "content-length",
  "expect",
  // Relay signs each delivery itself; a caller's own would pass for Relay's.
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  // Told to Relay, done by Relay (core/schedule.ts, core/lanes.ts): the delivery itself is not
  // delayed again, and arrives in its key's order.
  "relay-delay",
  "relay-not-before",
  "relay-ordering-key",
  // The caller's own URLs (core/callbacks.ts): told to Relay, not to its targets.
  "relay-callback",
  "relay-failure-callback",
]);

/** Never passed back from a target: hop-by-hop headers, cookies, and encodings undone on the way. */
const DROPPED_FROM_TARGET = new Set([
  ...HOP_BY_HOP,
  "proxy-authenticate",
  "content-length",
  "content-encoding",
  "set-cookie",
]);

/**
 * What a delivery carries of the caller's headers, its CDN-Loop marked with `loopMark` (this
 * Relay's, `core/loop.ts`).
 */
export function forwardableHeaders(headers: Headers, loopMark: string): Record<string, string> {
  const connectionListed = new Set(
    (headers.get("connection") ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
  const forwarded: [string, string][] = [];
  headers.forEach((value, name) => {
    if (DROPPED_TO_TARGET.has(name) || connectionListed.has(name)) return;
    if (name.startsWith("x-relay-") || name.startsWith("proxy-")) return;
    forwarded.push([name, value]);
  });
  forwarded.push([CDN_LOOP, markedCdnLoop(headers.get(CDN_LOOP), loopMark)]);
  // Entries, not assignments: a header named `__proto__` is a property like any other.
  return Object.fromEntries(forwarded);
}

/**
 * The headers of a call to a target, layer over layer (the caller's forwardable ones, the
 * target's configured ones, Relay's own): a later layer's header replaces an earlier one of the
 * same name whatever its case, so a caller cannot add its value to a configured one.
 */
export function layeredHeaders(...layers: Record<string, string>[]): Headers {
  const headers = new Headers();
  for (const layer of layers) {
    for (const [name, value] of Object.entries(layer)) headers.set(name, value);
  }
  return headers;
}

/** A target's answer headers that are safe to hand the caller. */
export function safeResponseHeaders(headers: Headers): Headers {
  const safe = new Headers();
  headers.forEach((value, name) => {
    if (!DROPPED_FROM_TARGET.has(name) && !name.startsWith("x-relay-")) safe.set(name, value);
  });
  return safe;
}

/**
 * A request's headers as the request log shows them: less those a target marks secret (`secret`,
 * lowercase names), which are forwarded and never kept or shown.
 */
export function loggedHeaders(
  headers: Record<string, string>,
  secret: readonly string[] = [],
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !secret.includes(name.toLowerCase())),
  );
}
