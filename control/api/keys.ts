/**
 * Project API keys: mint, rotate, revoke, reveal an auto-rotated successor. Plaintext is returned
 * once and stored only as a SHA-256 hash; live keys are capped per project. Every change reaches the edges through the change feed;
 * a revocation returns only once they have it.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { keyState } from "../../core/keys.ts";
import { keyModes } from "../../core/model.ts";
import { keyLifetimeDays, lifetimeDays, rotationLifetimeDays } from "../../core/policy.ts";
import { open } from "../../core/sealing.ts";
import { waitForEdges } from "../../store/changes.ts";
import * as keys from "../../store/keys.ts";
import {
  type IssuedKey,
  insertKey,
  type KeyRow,
  type KeyView,
  keyView,
  selectKeys,
} from "../../store/keys.ts";
import { claimRoom } from "../../store/limits.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { capsOf } from "./limits.ts";
import { readPolicy } from "./projects.ts";
import { displayName, parseInput } from "./validation.ts";

export const mintKeyBody = z.strictObject({
  name: displayName,
  mode: z.enum(keyModes),
  ttlDays: z.number().int().min(1).max(3650).nullable().optional(),
});

export async function listKeys(ctx: Ctx, slug: string): Promise<KeyView[]> {
  const access = await projectAccess(ctx, slug);
  return (await selectKeys(ctx.sql, access.projectId)).map((row) => keyView(row, ctx.now()));
}

export async function mintKey(ctx: Ctx, slug: string, input: unknown): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  const { name, mode, ttlDays } = parseInput(mintKeyBody, input);
  const lifetime = keyLifetimeDays(await readPolicy(ctx, access.projectId), access.role, ttlDays);
  const caps = capsOf(ctx);
  return ctx.sql.begin(async (tx) => {
    await claimRoom(tx, access.projectId, caps, { keys: 1 });
    return insertKey(tx, caps.now, { projectId: access.projectId, name, mode, lifetime });
  });
}

/** A linked successor, its plaintext returned once; the predecessor stays valid until it expires. */
export async function rotateKey(ctx: Ctx, slug: string, keyId: string): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  const policy = await readPolicy(ctx, access.projectId);
  const caps = capsOf(ctx);
  const { now } = caps;
  const issued = await keys.rotateKey(ctx.sql, caps, access.projectId, keyId, (predecessor) => {
    if (keyState(predecessor, now) !== "active") {
      throw new RelayError(
        "key_not_active",
        `key '${keyId}' is ${keyState(predecessor, now)}; only an active key rotates`,
      );
    }
    return rotationLifetimeDays(
      policy,
      access.role,
      lifetimeDays(predecessor.createdAt, predecessor.expiresAt),
    );
  });
  if (!issued) throw new RelayError("not_found", `no key '${keyId}'`);
  return issued;
}

/** Kills the key at once, with no grace; answers once every live edge refuses it. */
export async function revokeKey(ctx: Ctx, slug: string, keyId: string): Promise<KeyView> {
  const access = await projectAccess(ctx, slug);
  const now = ctx.now();
  const revoked = await keys.revokeKey(ctx.sql, now, access.projectId, keyId, (key) => {
    if (keyState(key, now) === "expired") {
      throw new RelayError(
        "key_not_active",
        `key '${keyId}' has expired; there is nothing to revoke`,
      );
    }
  });
  if (!revoked) throw new RelayError("not_found", `no key '${keyId}'`);
  if (revoked.sequence !== null) await waitForEdges(ctx.sql, revoked.sequence);
  return keyView(revoked.key, ctx.now());
}

/** The auto-rotated successor's plaintext, once; the sealed copy is destroyed as it is read. */
export async function revealSuccessor(ctx: Ctx, slug: string, keyId: string): Promise<IssuedKey> {
  const access = await projectAccess(ctx, slug);
  await findKey(ctx, access.projectId, keyId);
  const successorId = await keys.autoRotatedSuccessorId(ctx.sql, keyId);
  if (!successorId) {
    throw new RelayError("not_found", `key '${keyId}' has no auto-rotated successor`);
  }
  const sealed = await keys.claimSealedPlaintext(ctx.sql, successorId, ctx.now());
  if (!sealed) {
    throw new RelayError(
      "successor_already_revealed",
      "this successor was already revealed; rotate the key to get a new one",
    );
  }
  const plaintext = await open(ctx.sealingKey, sealed, successorId);
  const [row] = await selectKeys(ctx.sql, access.projectId, successorId);
  return { key: keyView(row as KeyRow, ctx.now()), plaintext };
}

async function findKey(ctx: Ctx, projectId: string, keyId: string): Promise<KeyRow> {
  const [key] = await selectKeys(ctx.sql, projectId, keyId);
  if (!key) throw new RelayError("not_found", `no key '${keyId}'`);
  return key;
}
