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
import type { Queryable, Sql } from "./db.ts";
import { type Caps, claimRoom } from "./limits.ts";

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

/**
 * A linked successor for the key, in one transaction with the key locked. `lifetimeOf` judges
 * the locked key: it answers the successor's lifetime, or throws to refuse (nothing is written).
 * The successor is one more live key (its predecessor lives on until it expires), so the
 * project's cap on them applies. A successor auto-rotated but never revealed gives way: its
 * plaintext is now unreachable. Null when the project has no such key.
 */
export function rotateKey(
  sql: Sql,
  caps: Caps,
  projectId: string,
  keyId: string,
  lifetimeOf: (predecessor: KeyRow) => number | null,
): Promise<IssuedKey | null> {
  const { now } = caps;
  return sql.begin(async (tx) => {
    const predecessor = await lockKey(tx, projectId, keyId);
    if (!predecessor) return null;
    const lifetime = lifetimeOf(predecessor);
    await claimRoom(tx, projectId, caps, { keys: 1 });
    await tx`
      update api_keys set revoked_at = ${now}, sealed_plaintext = null
      where predecessor_id = ${keyId} and sealed_plaintext is not null`;
    return insertKey(tx, now, {
      projectId,
      name: predecessor.name,
      mode: predecessor.mode,
      lifetime,
      predecessorId: keyId,
    });
  });
}

/**
 * Revokes the key at `now` (a sealed plaintext destroyed with it), in one transaction with the
 * key locked; `check` may refuse the locked key by throwing. A key revoked already stays as it
 * was, with no change to wait for (sequence null). Null when the project has no such key.
 */
export function revokeKey(
  sql: Sql,
  now: Date,
  projectId: string,
  keyId: string,
  check: (key: KeyRow) => void,
): Promise<{ key: KeyRow; sequence: bigint | null } | null> {
  return sql.begin(async (tx) => {
    const key = await lockKey(tx, projectId, keyId);
    if (!key) return null;
    if (key.revokedAt) return { key, sequence: null };
    check(key);
    const [revoked] = await tx<KeyRow[]>`
      update api_keys set revoked_at = ${now}, sealed_plaintext = null where id = ${keyId}
      returning id, name, mode, expires_at, created_at, predecessor_id, revoked_at, key_hash,
        (select id from api_keys s where s.predecessor_id = ${keyId}
          order by s.created_at desc limit 1) as successor_id`;
    const sequence = await recordChange(tx, projectId, "key", key.keyHash);
    return { key: revoked as KeyRow, sequence };
  });
}

/** The key's newest auto-rotated successor, revealed or not. */
export async function autoRotatedSuccessorId(sql: Sql, keyId: string): Promise<string | undefined> {
  const [successor] = await sql<{ id: string }[]>`
    select id from api_keys
    where predecessor_id = ${keyId} and auto_rotated order by created_at desc limit 1`;
  return successor?.id;
}

/**
 * Takes a successor's sealed plaintext, destroying the stored copy as it is read (and noting the
 * reveal), so only one caller ever gets it; undefined once it is gone.
 */
export async function claimSealedPlaintext(
  sql: Sql,
  keyId: string,
  now: Date,
): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const [claimed] = await sql<{ sealedPlaintext: Buffer }[]>`
    update api_keys k set sealed_plaintext = null, revealed_at = ${now}
    from (select sealed_plaintext from api_keys where id = ${keyId} for update) old
    where k.id = ${keyId} and old.sealed_plaintext is not null
    returning old.sealed_plaintext`;
  return claimed && new Uint8Array(claimed.sealedPlaintext);
}

/** The key, locked for the rest of the transaction; another project's key is not found. */
async function lockKey(tx: Queryable, projectId: string, keyId: string) {
  await tx`select 1 from api_keys where id = ${keyId} and project_id = ${projectId} for update`;
  const [key] = await selectKeys(tx, projectId, keyId);
  return key;
}
