/**
 * AES-256-GCM through node:crypto for the payload codec (core/payload-codec.ts) in the Node
 * processes: one synchronous call where Web Crypto's costs a trip through libuv's pool (about a
 * third of the CPU per seal here, bench:codec). The edge keeps Web Crypto, which every runtime has.
 */
import { createCipheriv, createDecipheriv } from "node:crypto";
import type { AesGcm } from "../core/payload-codec.ts";

const TAG_BYTES = 16;

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
