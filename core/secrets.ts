/**
 * Secrets Relay hands out (API keys, member tokens) and how they are stored: only their SHA-256
 * hash. The secrets carry 32 random bytes, so a fast hash is safe; lookups go by hash and the
 * final comparison is constant-time. Web Crypto only, so the edge can use it on any runtime.
 */
import { toBase64 } from "./base64.ts";
import type { KeyMode } from "./model.ts";

const RANDOM_BYTES = 32;

export const keyPrefix = { live: "rk_live_", test: "rk_test_" } as const satisfies Record<
  KeyMode,
  string
>;
export const memberTokenPrefix = "rmt_";

/** The shape every API key has; anything else is refused before any lookup. */
const API_KEY = /^rk_(live|test)_[A-Za-z0-9_-]{43}$/;

export function newSecret(prefix: string): string {
  return prefix + base64url(crypto.getRandomValues(new Uint8Array(RANDOM_BYTES)));
}

export function newApiKey(mode: KeyMode): string {
  return newSecret(keyPrefix[mode]);
}

export function isWellFormedApiKey(value: string): boolean {
  return API_KEY.test(value);
}

export async function hashSecret(secret: string): Promise<Uint8Array> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret));
  return new Uint8Array(digest);
}

/** Constant-time comparison of two equally long byte strings. */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return difference === 0;
}

/** Random identifiers such as `req_…` and `key_…`: 16 random bytes, URL-safe. */
export function newId(prefix: string): string {
  return `${prefix}_${base64url(idBytes(16))}`;
}

/**
 * Random bytes for ids, drawn from the runtime's generator 4 KiB at a time (256 ids): an edge
 * mints an id per request, and a draw costs about the same whatever its size (1.7% of the edge's
 * busy time under issue 27's load, one draw per id). Secrets (`newSecret`) draw their own.
 */
const idPool = new Uint8Array(4096);
let idPoolUsed = idPool.length;
function idBytes(count: number): Uint8Array {
  if (idPoolUsed + count > idPool.length) {
    crypto.getRandomValues(idPool);
    idPoolUsed = 0;
  }
  idPoolUsed += count;
  return idPool.subarray(idPoolUsed - count, idPoolUsed);
}

export function base64url(bytes: Uint8Array): string {
  return toBase64(bytes).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}
