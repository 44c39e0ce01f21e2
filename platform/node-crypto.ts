/**
 * node:crypto for the Node processes, where core/ has Web Crypto (which every runtime has, so
 * the edge on Deno keeps it): each is one synchronous call of a few microseconds where Web
 * Crypto's costs tens and a trip through libuv's thread pool (about a third of the CPU per seal
 * here, bench:codec; 4% of the worker's busy time signing, 4% of the control plane's hashing
 * tokens, in profiles under issue 27's load).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, KeyObject } from "node:crypto";
import type { AesGcm } from "../core/payload-codec.ts";

/** SHA-256, as core/secrets.ts `hashSecret` computes it, for hashing keys and tokens. */
export function sha256(plaintext: string): Uint8Array {
  return createHash("sha256").update(plaintext).digest();
}

/** HMAC-SHA256 under a Web Crypto key, as core/signing.ts `Hmac` takes it, for signing calls. */
export function hmacSha256(key: CryptoKey, content: Uint8Array): Uint8Array {
  return createHmac("sha256", KeyObject.from(key)).update(content).digest();
}

const TAG_BYTES = 16;

/** AES-256-GCM for the payload codec (core/payload-codec.ts). */
export const nodeAesGcm: AesGcm = async (raw) => {
  const key = Buffer.from(raw);
  return {
    async seal(iv, plaintext, aad) {
      const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(aad);
      return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    },
    async open(iv, sealed, aad) {
      const decipher = createDecipheriv("aes-256-gcm", key, iv)
        .setAAD(aad)
        .setAuthTag(sealed.subarray(sealed.byteLength - TAG_BYTES));
      return Buffer.concat([
        decipher.update(sealed.subarray(0, sealed.byteLength - TAG_BYTES)),
        decipher.final(),
      ]);
    },
  };
};
