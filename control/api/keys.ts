/**
 * Project API keys: mint, rotate, revoke, reveal an auto-rotated successor. Plaintext is returned
 * once and stored only as a SHA-256 hash. Every change reaches the edges through the change feed;
 * a revocation returns only once they have it.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { keyState } from "../../core/keys.ts";
import { keyModes } from "../../core/model.ts";
import { keyLifetimeDays, lifetimeDays, rotationLifetimeDays } from "../../core/policy.ts";
import { open } from "../../core/sealing.ts";
import { recordChange, waitForEdges } from "../../store/changes.ts";
import type { Queryable } from "../../store/db.ts";
import {
  type IssuedKey,
  insertKey,
  type KeyRow,
  type KeyView,
  keyView,
  selectKeys,
} from "../../store/keys.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { readPolicy } from "./projects.ts";
import { parseInput } from "./validation.ts";

const mintSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  mode: z.enum(keyModes),
  ttlDays: z.number().int().min(1).max(3650).nullable().optional(),
});

export async function listKeys(ctx: Ctx, slug: string): Promise<KeyView[]> {
  const access = await projectAccess(ctx, slug);
  return (await selectKeys(ctx.sql, access.projectId)).map((row) => keyView(row, ctx.now()));
}

export async function mintKey(ctx: Ctx, slug: string, input: unknown): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  const { name, mode, ttlDays } = parseInput(mintSchema, input);
  const lifetime = keyLifetimeDays(await readPolicy(ctx, access.projectId), access.role, ttlDays);
  return ctx.sql.begin((tx) =>
    insertKey(tx, ctx.now(), { projectId: access.projectId, name, mode, lifetime }),
  );
}

/** A linked successor, its plaintext returned once; the predecessor stays valid until it expires. */
export async function rotateKey(ctx: Ctx, slug: string, keyId: string): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  const policy = await readPolicy(ctx, access.projectId);
  return ctx.sql.begin(async (tx) => {
    const predecessor = await lockKey(tx, access.projectId, keyId);
    const now = ctx.now();
    if (keyState(predecessor, now) !== "active") {
      throw new RelayError(
        "key_not_active",
        `key '${keyId}' is ${keyState(predecessor, now)}; only an active key rotates`,
      );
    }
    // A successor auto-rotated but never revealed gives way: its plaintext is now unreachable.
    await tx`
      update api_keys set revoked_at = ${now}, sealed_plaintext = null
      where predecessor_id = ${keyId} and sealed_plaintext is not null`;
    const lifetime = rotationLifetimeDays(
      policy,
      access.role,
      lifetimeDays(predecessor.createdAt, predecessor.expiresAt),
    );
    return insertKey(tx, now, {
      projectId: access.projectId,
      name: predecessor.name,
      mode: predecessor.mode,
      lifetime,
      predecessorId: keyId,
    });
  });
}

/** Kills the key at once, with no grace; answers once every live edge refuses it. */
export async function revokeKey(ctx: Ctx, slug: string, keyId: string): Promise<KeyView> {
  const access = await projectAccess(ctx, slug);
  const { row, sequence } = await ctx.sql.begin(async (tx) => {
    const key = await lockKey(tx, access.projectId, keyId);
    const state = keyState(key, ctx.now());
    if (state === "revoked") return { row: key, sequence: null };
    if (state === "expired") {
      throw new RelayError(
        "key_not_active",
        `key '${keyId}' has expired; there is nothing to revoke`,
      );
    }
    const [revoked] = await tx<KeyRow[]>`
      update api_keys set revoked_at = ${ctx.now()}, sealed_plaintext = null where id = ${keyId}
      returning id, name, mode, expires_at, created_at, predecessor_id, revoked_at, key_hash,
        (select id from api_keys s where s.predecessor_id = ${keyId}
          order by s.created_at desc limit 1) as successor_id`;
    const changed = await recordChange(tx, access.projectId, "key", key.keyHash);
    return { row: revoked as KeyRow, sequence: changed };
  });
  if (sequence !== null) await waitForEdges(ctx.sql, sequence);
  return keyView(row, ctx.now());
}

/** The auto-rotated successor's plaintext, once; the sealed copy is destroyed as it is read. */
export async function revealSuccessor(ctx: Ctx, slug: string, keyId: string): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  await findKey(ctx, access.projectId, keyId);
  const [successor] = await ctx.sql<
    { id: string; sealedPlaintext: Buffer | null; revealedAt: Date | null }[]
  >`
    select id, sealed_plaintext, revealed_at from api_keys
    where predecessor_id = ${keyId} and auto_rotated order by created_at desc limit 1`;
  if (!successor) {
    throw new RelayError("not_found", `key '${keyId}' has no auto-rotated successor`);
  }
  const [claimed] = await ctx.sql<{ sealedPlaintext: Buffer }[]>`
    update api_keys k set sealed_plaintext = null, revealed_at = ${ctx.now()}
    from (select sealed_plaintext from api_keys where id = ${successor.id} for update) old
    where k.id = ${successor.id} and old.sealed_plaintext is not null
    returning old.sealed_plaintext`;
  if (!claimed) {
    throw new RelayError(
      "successor_already_revealed",
      "this successor was already revealed; rotate the key to get a new one",
    );
  }
  const plaintext = await open(
    ctx.sealingKey,
    new Uint8Array(claimed.sealedPlaintext),
    successor.id,
  );
  const [row] = await selectKeys(ctx.sql, access.projectId, successor.id);
  return { key: keyView(row as KeyRow, ctx.now()), plaintext };
}

async function findKey(ctx: Ctx, projectId: string, keyId: string): Promise<KeyRow> {
  const [key] = await selectKeys(ctx.sql, projectId, keyId);
  if (!key) throw new RelayError("not_found", `no key '${keyId}'`);
  return key;
}

async function lockKey(tx: Queryable, projectId: string, keyId: string): Promise<KeyRow> {
  await tx`select 1 from api_keys where id = ${keyId} and project_id = ${projectId} for update`;
  const [key] = await selectKeys(tx, projectId, keyId);
  if (!key) throw new RelayError("not_found", `no key '${keyId}'`);
  return key;
}
