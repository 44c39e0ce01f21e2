/**
 * Project API keys as stored: a SHA-256 hash of each plaintext (never the plaintext, but for an
 * auto-rotated successor's, sealed until its one reveal), its lifetime and its predecessor.
 * Every change goes on the change feed with the key's hash, so edges drop or take it.
 */
import { type KeyState, keyState } from "../core/keys.ts";
import type { KeyMode } from "../core/model.ts";
import { expiryFor } from "../core/policy.ts";
import { hashSecret, newApiKey, newId } from "../core/secrets.ts";
import { recordChange } from "./changes.ts";
import type { Queryable } from "./db.ts";

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

export interface KeyRow extends Omit<KeyView, "status"> {
  revokedAt: Date | null;
  keyHash: Buffer;
}

export interface NewKey {
  projectId: string;
  name: string;
  mode: KeyMode;
  lifetime: number | null;
  predecessorId?: string;
  /** Auto-rotation keeps the plaintext sealed until its one reveal. */
  seal?: (id: string, plaintext: string) => Promise<Uint8Array>;
}

/** Inserts a key and its change-feed row; shared by mint, rotate and auto-rotation. */
export async function insertKey(tx: Queryable, now: Date, key: NewKey): Promise<IssuedKey> {
  const plaintext = newApiKey(key.mode);
  const id = newId("key");
  const keyHash = await hashSecret(plaintext);
  const sealed = key.seal ? await key.seal(id, plaintext) : null;
  await tx`
    insert into api_keys (id, project_id, name, mode, key_hash, expires_at, created_at,
      predecessor_id, auto_rotated, sealed_plaintext)
    values (${id}, ${key.projectId}, ${key.name}, ${key.mode}, ${keyHash},
      ${expiryFor(key.lifetime, now)}, ${now}, ${key.predecessorId ?? null}, ${sealed !== null},
      ${sealed})`;
  await recordChange(tx, key.projectId, "key", keyHash);
  // The predecessor's "successor available" changes too.
  if (key.predecessorId) {
    const [predecessor] = await tx<{ keyHash: Buffer }[]>`
      select key_hash from api_keys where id = ${key.predecessorId}`;
    if (predecessor) await recordChange(tx, key.projectId, "key", predecessor.keyHash);
  }
  const [row] = await selectKeys(tx, key.projectId, id);
  return { key: keyView(row as KeyRow, now), plaintext };
}

/** Keys with their newest successor; another project's key id is simply not found. */
export function selectKeys(sql: Queryable, projectId: string, id?: string) {
  return sql<KeyRow[]>`
    select k.id, k.name, k.mode, k.expires_at, k.revoked_at, k.created_at, k.predecessor_id,
      k.key_hash,
      (select s.id from api_keys s where s.predecessor_id = k.id
        order by s.created_at desc limit 1) as successor_id
    from api_keys k
    where k.project_id = ${projectId} ${id === undefined ? sql`` : sql`and k.id = ${id}`}
    order by k.created_at desc, k.id`;
}

export function keyView({ revokedAt, keyHash: _, ...key }: KeyRow, now: Date): KeyView {
  return { ...key, status: keyState({ expiresAt: key.expiresAt, revokedAt }, now) };
}
