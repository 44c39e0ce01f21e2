import { expect, test } from "vitest";
import { jsonPayload, jsonPayloadValue, PayloadCipher, webAesGcm } from "../core/payload-codec.ts";
import { hashSecret } from "../core/secrets.ts";
import { importSigningKey, webCryptoHmac } from "../core/signing.ts";
import { hmacSha256, nodeAesGcm, sha256 } from "./node-crypto.ts";

const SECRET = "3c".repeat(32);

test("node:crypto and Web Crypto seal alike: each opens what the other sealed", async () => {
  const node = await PayloadCipher.fromSecrets([SECRET], nodeAesGcm);
  const web = await PayloadCipher.fromSecrets([SECRET], webAesGcm);
  const [fromNode] = await node.encode([jsonPayload({ from: "node" })]);
  const [fromWeb] = await web.encode([jsonPayload({ from: "web" })]);
  expect(jsonPayloadValue((await web.decode(fromNode ? [fromNode] : []))[0])).toEqual({
    from: "node",
  });
  expect(jsonPayloadValue((await node.decode(fromWeb ? [fromWeb] : []))[0])).toEqual({
    from: "web",
  });
});

test("node:crypto refuses a sealed payload altered by one bit", async () => {
  const node = await PayloadCipher.fromSecrets([SECRET], nodeAesGcm);
  const [sealed] = await node.encode([jsonPayload("x")]);
  const data = Uint8Array.from(sealed?.data ?? []);
  data[20] = (data[20] ?? 0) ^ 1;
  await expect(node.decode([{ ...sealed, data }])).rejects.toThrow();
});

test("node:crypto hashes a secret as Web Crypto does, so either finds what the other stored", async () => {
  for (const secret of ["rk_live_abc", "rmt_é✓", ""]) {
    expect(sha256(secret)).toEqual(Buffer.from(await hashSecret(secret)));
  }
});

test("node:crypto signs as Web Crypto does, under the same key", async () => {
  const key = await importSigningKey(new TextEncoder().encode("k".repeat(32)));
  const content = new TextEncoder().encode("msg_1.1700000000.{}");
  expect(hmacSha256(key, content)).toEqual(Buffer.from(await webCryptoHmac(key, content)));
});
