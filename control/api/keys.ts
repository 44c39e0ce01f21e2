/** Project API keys: plaintext returned once, stored as a SHA-256 hash. */
import { z } from "zod";
import { type KeyState, keyState } from "../../core/keys.ts";
import { type KeyMode, keyModes } from "../../core/model.ts";
import { expiryFor, keyLifetimeDays } from "../../core/policy.ts";
import { hashSecret, newApiKey, newId } from "../../core/secrets.ts";
import type { Sql } from "../db/client.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { readPolicy } from "./projects.ts";
import { parseInput } from "./validation.ts";

const mintSchema = z.object({
  name: z.string().trim().min(1).max(200),
  mode: z.enum(keyModes),
  ttlDays: z.number().int().min(1).max(3650).nullable().optional(),
});

export interface KeyView {
  id: string;
  name: string;
  mode: KeyMode;
  status: KeyState;
  expiresAt: Date | null;
  createdAt: Date;
  predecessorId: string | null;
  successorId: string | null;
}

export interface IssuedKey {
  key: KeyView;
  plaintext: string;
}

export async function listKeys(ctx: Ctx, slug: string): Promise<KeyView[]> {
  const access = await projectAccess(ctx, slug);
  return selectKeys(ctx, access.projectId);
}

export async function mintKey(ctx: Ctx, slug: string, input: unknown): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  const { name, mode, ttlDays } = parseInput(mintSchema, input);
  const lifetime = keyLifetimeDays(await readPolicy(ctx, access.projectId), access.role, ttlDays);
  const plaintext = newApiKey(mode);
  const id = newId("key");
  const now = ctx.now();
  await ctx.sql`
    insert into api_keys (id, project_id, name, mode, key_hash, expires_at, created_at)
    values (${id}, ${access.projectId}, ${name}, ${mode}, ${await hashSecret(plaintext)},
      ${expiryFor(lifetime, now)}, ${now})`;
  const [key] = await selectKeys(ctx, access.projectId, id);
  return { key: key as KeyView, plaintext };
}

async function selectKeys(ctx: Pick<Ctx, "sql" | "now">, projectId: string, id?: string) {
  const sql: Sql = ctx.sql;
  const rows = await sql<(Omit<KeyView, "status"> & { revokedAt: Date | null })[]>`
    select k.id, k.name, k.mode, k.expires_at, k.revoked_at, k.created_at, k.predecessor_id,
      s.id as successor_id
    from api_keys k left join api_keys s on s.predecessor_id = k.id
    where k.project_id = ${projectId} ${id === undefined ? sql`` : sql`and k.id = ${id}`}
    order by k.created_at desc, k.id`;
  const now = ctx.now();
  return rows.map(
    ({ revokedAt, ...key }): KeyView => ({
      ...key,
      status: keyState({ expiresAt: key.expiresAt, revokedAt }, now),
    }),
  );
}
