import { expect, test } from "vitest";
import { importSealingKey, open, seal } from "./sealing.ts";

const key = await importSealingKey("00".repeat(32));

test("a sealed plaintext opens with the same key and context", async () => {
  const sealed = await seal(key, "rk_live_secret", "key_1");
  expect(new TextDecoder().decode(sealed)).not.toContain("rk_live_secret");
  expect(await open(key, sealed, "key_1")).toBe("rk_live_secret");
});

test("another context, another key or a flipped bit does not open", async () => {
  const sealed = await seal(key, "rk_live_secret", "key_1");
  await expect(open(key, sealed, "key_2")).rejects.toThrow();
  await expect(open(await importSealingKey("11".repeat(32)), sealed, "key_1")).rejects.toThrow();
  const tampered = sealed.slice();
  tampered[tampered.length - 1] = (tampered.at(-1) ?? 0) ^ 1;
  await expect(open(key, tampered, "key_1")).rejects.toThrow();
});
