import { expect, test } from "vitest";
import { jsonPayload, jsonPayloadValue, PayloadCipher, webAesGcm } from "../core/payload-codec.ts";
import { nodeAesGcm } from "./aes-gcm.ts";

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
