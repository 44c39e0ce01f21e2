/**
 * Each project's notification URL and the secret that signs its events, as stored: the secret
 * sealed (AES-256-GCM, the row id as context), shown in plaintext only in the answer that made
 * it, and opened only for the worker's sending.
 */
import { open, seal } from "../core/sealing.ts";
import { newId } from "../core/secrets.ts";
import { decodeSigningSecret, newSigningSecret } from "../core/signing.ts";
import type { Sql } from "./db.ts";

/** What a member may read back: never the secret. */
export interface NotificationSettings {
  url: string;
  createdAt: Date;
}

/** The project's settings, or null when it set no URL. */
export async function notificationSettings(
  sql: Sql,
  projectId: string,
): Promise<NotificationSettings | null> {
  const [row] = await sql<NotificationSettings[]>`
    select url, created_at from notification_settings where project_id = ${projectId}`;
  return row ?? null;
}

/**
 * Sets the project's URL in one statement: the first set makes the secret and answers its
 * plaintext; a later one changes the URL only, keeps the secret, and answers `secret: null`.
 */
export async function setNotificationUrl(
  sql: Sql,
  sealingKey: CryptoKey,
  projectId: string,
  url: string,
  now: Date,
): Promise<NotificationSettings & { secret: string | null }> {
  const id = newId("nset");
  const secret = newSigningSecret();
  const sealed = await seal(sealingKey, secret, id);
  // On a conflict the row keeps its own id, so `created` tells which way it went.
  const [row] = await sql<(NotificationSettings & { created: boolean })[]>`
    insert into notification_settings (id, project_id, url, sealed_secret, created_at)
    values (${id}, ${projectId}, ${url}, ${Buffer.from(sealed)}, ${now})
    on conflict (project_id) do update set url = excluded.url
    returning url, created_at, id = ${id} as created`;
  if (!row) throw new Error("the upsert answered no row");
  return { url: row.url, createdAt: row.createdAt, secret: row.created ? secret : null };
}

/**
 * A new secret for the project's URL, sealed over the old one, which signs nothing from now on;
 * answers its plaintext. Null when the project set no URL.
 */
export function rotateNotificationSecret(
  sql: Sql,
  sealingKey: CryptoKey,
  projectId: string,
): Promise<(NotificationSettings & { secret: string }) | null> {
  return sql.begin(async (tx) => {
    const [current] = await tx<{ id: string }[]>`
      select id from notification_settings where project_id = ${projectId} for update`;
    if (!current) return null;
    const secret = newSigningSecret();
    const sealed = await seal(sealingKey, secret, current.id);
    const [row] = await tx<NotificationSettings[]>`
      update notification_settings set sealed_secret = ${Buffer.from(sealed)}
      where id = ${current.id}
      returning url, created_at`;
    if (!row) throw new Error("the locked row is gone");
    return { ...row, secret };
  });
}

/** Removes the project's URL and secret; false when it had none. */
export async function deleteNotificationSettings(sql: Sql, projectId: string): Promise<boolean> {
  const deleted = await sql`delete from notification_settings where project_id = ${projectId}`;
  return deleted.count > 0;
}

/** Where a project's events go, with the secret opened to its key bytes: for the sender only. */
export interface NotificationTarget {
  url: string;
  key: Uint8Array<ArrayBuffer>;
}

/** Whether the project `slug` set a notification URL. */
export async function notifies(sql: Sql, slug: string): Promise<boolean> {
  const [row] = await sql<{ set: boolean }[]>`
    select exists (
      select 1 from notification_settings n join projects p on p.id = n.project_id
      where p.slug = ${slug}) as set`;
  return row?.set === true;
}

/** The project `slug`'s URL and key, or null when it set none. */
export async function notificationTarget(
  sql: Sql,
  sealingKey: CryptoKey,
  slug: string,
): Promise<NotificationTarget | null> {
  const [row] = await sql<{ id: string; url: string; sealedSecret: Uint8Array }[]>`
    select n.id, n.url, n.sealed_secret
    from notification_settings n join projects p on p.id = n.project_id
    where p.slug = ${slug}`;
  if (!row) return null;
  const secret = await open(sealingKey, new Uint8Array(row.sealedSecret), row.id);
  return { url: row.url, key: decodeSigningSecret(secret) };
}
