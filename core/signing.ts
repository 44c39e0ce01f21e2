/**
 * Signed deliveries, the Standard Webhooks way (standardwebhooks.com): each delivery carries
 * `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature`, a space-separated
 * list of `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per live secret (two while
 * a rotation's overlap runs). Secrets are `whsec_` + base64 of 32 random bytes. Web Crypto only,
 * so the edge signs streams on any runtime and the worker signs with the same code.
 */
import { toBase64 } from "./base64.ts";
import { timingSafeEqual } from "./secrets.ts";

export const SIGNING_SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
/** The spec's bounds on a secret's decoded size. */
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;
/** How far a timestamp may be from the verifier's clock (the spec's recommendation). */
export const TIMESTAMP_TOLERANCE_SECONDS = 5 * 60;

/** The overlap a rotation gives when none is asked for, and the longest it may ask for. */
export const DEFAULT_OVERLAP_SECONDS = 24 * 60 * 60;
export const MAX_OVERLAP_SECONDS = 7 * 24 * 60 * 60;

export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + toBase64(crypto.getRandomValues(new Uint8Array(SECRET_BYTES)));
}

/** A `whsec_...` secret's key bytes; throws for anything that is not one. */
export function decodeSigningSecret(secret: string): Uint8Array<ArrayBuffer> {
  if (!secret.startsWith(SIGNING_SECRET_PREFIX)) throw new Error("not a whsec_ secret");
  const bytes = fromBase64(secret.slice(SIGNING_SECRET_PREFIX.length));
  if (bytes.length < MIN_SECRET_BYTES || bytes.length > MAX_SECRET_BYTES) {
    throw new Error(`a signing secret holds ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`);
  }
  return bytes;
}

/** An HMAC-SHA256 key for `sign`, from a secret's bytes (import once, sign many times). */
export function importSigningKey(secretBytes: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", secretBytes, { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
}

/** A secret's key while it signs; `expiresAt` null until a rotation gives it an end. */
export interface SigningKey {
  key: CryptoKey;
  expiresAt: Date | null;
}

/** Whether a secret still signs at `now`: past its overlap it no longer does. */
export function signsAt(secret: { expiresAt: Date | null }, now: Date): boolean {
  return secret.expiresAt === null || secret.expiresAt.getTime() > now.getTime();
}

/** HMAC-SHA256 of `content` under a signing key. Runtimes may pass a faster one than Web Crypto's. */
export type Hmac = (
  key: CryptoKey,
  content: Uint8Array<ArrayBuffer>,
) => Uint8Array | Promise<Uint8Array>;

export const webCryptoHmac: Hmac = async (key, content) =>
  new Uint8Array(await crypto.subtle.sign("HMAC", key, content));

/** The `webhook-signature` value: one `v1,...` entry per key, space-separated. */
export async function sign(
  keys: CryptoKey[],
  id: string,
  timestamp: number,
  body: Uint8Array | string,
  hmac: Hmac = webCryptoHmac,
): Promise<string> {
  const content = signedContent(id, timestamp, body);
  const signatures = await Promise.all(
    keys.map(async (key) => `v1,${toBase64(await hmac(key, content))}`),
  );
  return signatures.join(" ");
}

/**
 * The three headers of a delivery attempt at `now`, signed with every key that still signs then.
 * With no such key (an endpoint created before signing existed, never rotated) there is no
 * `webhook-signature`.
 */
export async function webhookHeaders(
  keys: SigningKey[],
  id: string,
  now: Date,
  body: Uint8Array | string,
  hmac: Hmac = webCryptoHmac,
): Promise<Record<string, string>> {
  const timestamp = Math.floor(now.getTime() / 1000);
  const live = keys.filter((k) => signsAt(k, now)).map((k) => k.key);
  const headers: Record<string, string> = {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
  };
  if (live.length > 0) headers["webhook-signature"] = await sign(live, id, timestamp, body, hmac);
  return headers;
}

/**
 * What a receiver does: true when the timestamp is within the tolerance of `now` and one of the
 * header's `v1` signatures matches `secret`'s (compared in constant time).
 */
export async function verify(
  secret: string,
  headers: { id: string; timestamp: string; signature: string },
  body: Uint8Array | string,
  now: Date,
): Promise<boolean> {
  if (!/^\d{1,12}$/.test(headers.timestamp)) return false;
  const timestamp = Number(headers.timestamp);
  if (Math.abs(now.getTime() / 1000 - timestamp) > TIMESTAMP_TOLERANCE_SECONDS) return false;
  const key = await importSigningKey(decodeSigningSecret(secret));
  const expected = new TextEncoder().encode(await sign([key], headers.id, timestamp, body));
  let matched = false;
  for (const candidate of headers.signature.split(" ")) {
    if (timingSafeEqual(new TextEncoder().encode(candidate), expected)) matched = true;
  }
  return matched;
}

/** `{id}.{timestamp}.` then the body's exact bytes. */
function signedContent(
  id: string,
  timestamp: number,
  body: Uint8Array | string,
): Uint8Array<ArrayBuffer> {
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const content = new Uint8Array(prefix.length + bytes.length);
  content.set(prefix);
  content.set(bytes, prefix.length);
  return content;
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) throw new Error("not base64");
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
