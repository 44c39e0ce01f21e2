/**
 * The dev stack's own secrets, generated once under `.relay/` with mode 0600: the admin token,
 * the edge token and the encryption key for auto-rotated successors.
 */
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ENCRYPTION_KEY_HEX } from "../core/env.ts";

const secretsSchema = z.object({
  adminToken: z.string().min(32),
  edgeToken: z.string().min(32),
  encryptionKey: z.string().regex(ENCRYPTION_KEY_HEX),
});

export type DevSecrets = z.infer<typeof secretsSchema>;

export async function loadOrCreateSecrets(dir: string): Promise<DevSecrets> {
  const file = join(dir, "secrets.json");
  const existing = await readFile(file, "utf8").catch(() => null);
  if (existing !== null) return secretsSchema.parse(JSON.parse(existing));
  const secrets: DevSecrets = {
    adminToken: `radm_${randomBytes(32).toString("base64url")}`,
    edgeToken: `redg_${randomBytes(32).toString("base64url")}`,
    encryptionKey: randomBytes(32).toString("hex"),
  };
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600, flag: "wx" });
  return secrets;
}
