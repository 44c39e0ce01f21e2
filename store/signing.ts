/**
 * Each endpoint's delivery signing secrets as stored: sealed (AES-256-GCM, the row id as
 * context), opened only for the worker's attempt and the edge's project state.
 */
import { open, seal } from "../core/sealing.ts";
import { newId } from "../core/secrets.ts";
import { decodeSigningSecret, newSigningSecret } from "../core/signing.ts";
import { recordEndpointChange } from "./changes.ts";
import type { Queryable, Sql } from "./db.ts";

/** A live secret, sealed as stored. */
export interface SealedSigningSecret {
  id: string;
  sealedSecret: Uint8Array<ArrayBuffer>;
  expiresAt: Date | null;
}

/** A new current secret for the endpoint, in the caller's transaction; answers its plaintext. */
export async function addSigningSecret(
  tx: Queryable,
  sealingKey: CryptoKey,
  endpointId: string,
  now: Date,
): Promise<string> {
  const id = newId("sig");
  const secret = newSigningSecret();
  const sealed = await seal(sealingKey, secret, id);
  await tx`
    insert into signing_secrets (id, endpoint_id, sealed_secret, created_at)
    values (${id}, ${endpointId}, ${Buffer.from(sealed)}, ${now})`;
  return secret;
}

export interface SigningRotation {
  /** The new secret's plaintext. */
  signingSecret: string;
  /** When the previous secrets stop signing; null when there were none. */
  previousExpiresAt: Date | null;
  /** The change that tells edges; a rotation is done once they have it. */
  sequence: bigint;
}

/**
 * Rotates the signing secrets of the endpoint at `line/path`, in one transaction: secrets that
 * stopped signing by `now` go, the live ones sign until `overlapEnd` at the latest (never later
 * than an earlier rotation gave them), and a new one signs from now. Null when there is no such
 * endpoint.
 */
export function rotateSigningSecrets(
  sql: Sql,
  sealingKey: CryptoKey,
  endpoint: { projectId: string; line: string; path: string },
  now: Date,
  overlapEnd: Date,
): Promise<SigningRotation | null> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ id: string }[]>`
      select id from endpoints
      where project_id = ${endpoint.projectId} and line_key = ${endpoint.line}
        and path = ${endpoint.path}
      for update`;
    if (!row) return null;
    await tx`delete from signing_secrets where endpoint_id = ${row.id} and expires_at <= ${now}`;
    const previous = await tx<{ expiresAt: Date }[]>`
      update signing_secrets
      set expires_at = least(coalesce(expires_at, ${overlapEnd}), ${overlapEnd})
      where endpoint_id = ${row.id}
      returning expires_at`;
    const signingSecret = await addSigningSecret(tx, sealingKey, row.id, now);
    const previousExpiresAt = previous.reduce<Date | null>(
      (max, p) => (max === null || p.expiresAt > max ? p.expiresAt : max),
      null,
    );
    const sequence = await recordEndpointChange(
      tx,
      endpoint.projectId,
      endpoint.line,
      endpoint.path,
    );
    return { signingSecret, previousExpiresAt, sequence };
  });
}

/** The secrets that sign at `now` for the endpoint that owns `targetId`, sealed. */
export function signingSecretsOfTarget(
  sql: Sql,
  targetId: string,
  now: Date,
): Promise<SealedSigningSecret[]> {
  return sql<SealedSigningSecret[]>`
    select s.id, s.sealed_secret, s.expires_at
    from signing_secrets s join targets t on t.endpoint_id = s.endpoint_id
    where t.id = ${targetId} and (s.expires_at is null or s.expires_at > ${now})
    order by s.created_at`;
}

export interface EndpointSigningSecrets {
  line: string;
  path: string;
  secrets: { key: Uint8Array<ArrayBuffer>; expiresAt: Date | null }[];
}

/**
 * A project's live secrets by endpoint (or one endpoint's), opened to their key bytes: for the
 * edge's state only (the edge signs what it streams), never for a member.
 */
export async function projectSigningSecrets(
  sql: Sql,
  sealingKey: CryptoKey,
  projectId: string,
  now: Date,
  only?: { line: string; path: string },
): Promise<EndpointSigningSecrets[]> {
  const rows = await sql<(SealedSigningSecret & { lineKey: string; path: string })[]>`
    select e.line_key, e.path, s.id, s.sealed_secret, s.expires_at
    from signing_secrets s join endpoints e on e.id = s.endpoint_id
    where e.project_id = ${projectId} and (s.expires_at is null or s.expires_at > ${now})
      ${only ? sql`and e.line_key = ${only.line} and e.path = ${only.path}` : sql``}
    order by e.line_key, e.path, s.created_at`;
  const byEndpoint = new Map<string, EndpointSigningSecrets>();
  for (const row of rows) {
    const id = `${row.lineKey}/${row.path}`;
    const entry = byEndpoint.get(id) ?? { line: row.lineKey, path: row.path, secrets: [] };
    const secret = await open(sealingKey, new Uint8Array(row.sealedSecret), row.id);
    entry.secrets.push({ key: decodeSigningSecret(secret), expiresAt: row.expiresAt });
    byEndpoint.set(id, entry);
  }
  return [...byEndpoint.values()];
}
