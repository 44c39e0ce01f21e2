/** Which caller headers reach a target. */

/** Never forwarded: credentials, the connection's own headers, and Relay's namespace. */
const DROPPED = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "host",
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "expect",
]);

export function forwardableHeaders(headers: Headers): Record<string, string> {
  const connectionListed = new Set(
    (headers.get("connection") ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
  const forwarded: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (DROPPED.has(name) || connectionListed.has(name)) return;
    if (name.startsWith("x-relay-") || name.startsWith("proxy-")) return;
    forwarded[name] = value;
  });
  return forwarded;
}

/** Never passed back from a target: the connection's own headers, and encodings undone on the way. */
const DROPPED_FROM_TARGET = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "proxy-authenticate",
  "content-length",
  "content-encoding",
  "set-cookie",
]);

/** A target's answer headers that are safe to hand the caller. */
export function safeResponseHeaders(headers: Headers): Headers {
  const safe = new Headers();
  headers.forEach((value, name) => {
    if (!DROPPED_FROM_TARGET.has(name) && !name.startsWith("x-relay-")) safe.set(name, value);
  });
  return safe;
}
