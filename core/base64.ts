/**
 * Base64 for whatever runtime runs it (the edge runs on Deno too, without Buffer): bodies as they
 * travel inline in workflow inputs, Temporal payloads in protobuf's JSON, signatures, ids.
 */
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_CODES = new TextEncoder().encode(BASE64);
const BASE64_VALUES = new Uint8Array(128);
for (const [value, code] of BASE64_CODES.entries()) BASE64_VALUES[code] = value;

/**
 * Bytes in base64 (padded, standard alphabet). By table, since btoa over a byte-per-char string
 * costs tens of milliseconds for a 256 KiB body, and a millisecond or more for a batch's start.
 */
export function toBase64(bytes: Uint8Array): string {
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  let o = 0;
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n =
      ((bytes[i] as number) << 16) | ((bytes[i + 1] as number) << 8) | (bytes[i + 2] as number);
    out[o++] = BASE64_CODES[n >> 18] as number;
    out[o++] = BASE64_CODES[(n >> 12) & 63] as number;
    out[o++] = BASE64_CODES[(n >> 6) & 63] as number;
    out[o++] = BASE64_CODES[n & 63] as number;
  }
  const rest = bytes.length - i;
  if (rest > 0) {
    const n = ((bytes[i] as number) << 16) | (rest === 2 ? (bytes[i + 1] as number) << 8 : 0);
    out[o++] = BASE64_CODES[n >> 18] as number;
    out[o++] = BASE64_CODES[(n >> 12) & 63] as number;
    out[o++] = rest === 2 ? (BASE64_CODES[(n >> 6) & 63] as number) : 0x3d;
    out[o++] = 0x3d; // '='
  }
  return new TextDecoder().decode(out);
}

/** Base64 back to its bytes; what is not base64 decodes to bytes of no meaning, unchecked. */
export function fromBase64(base64: string): Uint8Array<ArrayBuffer> {
  const codes = new TextEncoder().encode(base64);
  let end = codes.length;
  while (end > 0 && codes[end - 1] === 0x3d) end--;
  const out = new Uint8Array(Math.floor((end * 3) / 4));
  const value = (i: number) => BASE64_VALUES[codes[i] as number] as number;
  let o = 0;
  let i = 0;
  for (; i + 3 < end; i += 4) {
    const n = (value(i) << 18) | (value(i + 1) << 12) | (value(i + 2) << 6) | value(i + 3);
    out[o++] = n >> 16;
    out[o++] = (n >> 8) & 0xff;
    out[o++] = n & 0xff;
  }
  // The last 2 or 3 characters hold 1 or 2 bytes.
  if (end - i >= 2) {
    const n = (value(i) << 18) | (value(i + 1) << 12) | (end - i === 3 ? value(i + 2) << 6 : 0);
    out[o++] = n >> 16;
    if (end - i === 3) out[o++] = (n >> 8) & 0xff;
  }
  return out;
}
