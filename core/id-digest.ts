/**
 * The digest of the ids Relay derives from callers' values: an Idempotency-Key's request id and
 * its body's tag (core/idempotency.ts), an ordering key's lane id (core/lanes.ts). Those ids
 * travel in plain Temporal metadata (workflow ids, a start's request id), which the payload
 * codec does not seal. Unkeyed hashes of guessable values could be confirmed by anyone who reads
 * that metadata; keyed with the deployment's id key (HMAC-SHA-256, derived from
 * RELAY_ENCRYPTION_KEY on the control plane and handed to the edges with the payload keys), they
 * say nothing without it. A deployment whose ids are still unkeyed in flight keeps them so for a
 * while (RELAY_DERIVED_IDS=unkeyed, docs/operations.md).
 */
import { deriveFromSecret } from "./payload-codec.ts";

export type IdDigest = (bytes: Uint8Array<ArrayBuffer>) => Promise<Uint8Array>;

/** SHA-256 alone: the ids of a deployment that keeps them unkeyed. */
export const unkeyedDigest: IdDigest = async (bytes) =>
  new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));

/** HMAC-SHA-256 under the deployment's id key; none (empty), the unkeyed digest. */
export async function idDigest(key: Uint8Array<ArrayBuffer>): Promise<IdDigest> {
  if (key.byteLength === 0) return unkeyedDigest;
  const hmac = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return async (bytes) => new Uint8Array(await crypto.subtle.sign("HMAC", hmac, bytes));
}

const ID_KEY_INFO = new TextEncoder().encode("relay derived ids v1");

/** The deployment's id key, from its encryption key (64 hex characters). */
export const deriveIdKey = (encryptionKeyHex: string): Promise<Uint8Array<ArrayBuffer>> =>
  deriveFromSecret(encryptionKeyHex, ID_KEY_INFO);
