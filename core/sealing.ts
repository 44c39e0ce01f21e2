/**
 * AES-256-GCM for the one secret Relay keeps recoverable: an auto-rotated successor's plaintext,
 * until its single reveal. Web Crypto only. Layout: 12-byte IV, then ciphertext and tag.
 */
const IV_BYTES = 12;

export async function importSealingKey(hex: string): Promise<CryptoKey> {
  if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error("the sealing key must be 64 hex characters");
  const raw = new Uint8Array(hex.match(/../g)?.map((byte) => Number.parseInt(byte, 16)) ?? []);
  return crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
}

/** `context` (the key id) is authenticated: a sealed value moved to another row will not open. */
export async function seal(
  key: CryptoKey,
  plaintext: string,
  context: string,
): Promise<Uint8Array<ArrayBuffer>> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(context) },
    key,
    new TextEncoder().encode(plaintext),
  );
  const out = new Uint8Array(IV_BYTES + sealed.byteLength);
  out.set(iv);
  out.set(new Uint8Array(sealed), IV_BYTES);
  return out;
}

export async function open(
  key: CryptoKey,
  sealed: Uint8Array<ArrayBuffer>,
  context: string,
): Promise<string> {
  const plain = await crypto.subtle.decrypt(
    {
      name: "AES-GCM",
      iv: sealed.subarray(0, IV_BYTES),
      additionalData: new TextEncoder().encode(context),
    },
    key,
    sealed.subarray(IV_BYTES),
  );
  return new TextDecoder().decode(plain);
}
