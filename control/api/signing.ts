/**
 * Each endpoint's delivery signing secrets: created with the endpoint, rotated with an overlap,
 * shown only in those two answers. Stored sealed (AES-256-GCM, the row id as context); the worker
 * opens them per attempt, and the edge gets the live ones' bytes in its project state.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { open, seal } from "../../core/sealing.ts";
import { newId } from "../../core/secrets.ts";
import {
  DEFAULT_OVERLAP_SECONDS,
  decodeSigningSecret,
  MAX_OVERLAP_SECONDS,
  newSigningSecret,
} from "../../core/signing.ts";
import type { Queryable, Sql } from "../db/client.ts";
import { recordChange, waitForEdges } from "./changes.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export interface RotatedSecret {
  /** The new `whsec_...` secret, shown this once. */
  signingSecret: string;
  /** When the previous secrets stop signing; null when there were none. */
  previousExpiresAt: Date | null;
}

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

const rotateInput = z.strictObject({
  overlapSeconds: z.number().int().min(0).max(MAX_OVERLAP_SECONDS).default(DEFAULT_OVERLAP_SECONDS),
});

/**
 * A new secret; the ones live until now keep signing beside it for the overlap (never longer
 * than an earlier rotation already gave them). Answers once every edge signs with the new one.
 */
export async function rotateSigningSecret(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
  input: unknown,
): Promise<RotatedSecret> {
  const access = await projectAccess(ctx, slug);
  const { overlapSeconds } = parseInput(rotateInput, input ?? {});
  const now = ctx.now();
  const overlapEnd = new Date(now.getTime() + overlapSeconds * 1000);
  const { rotated, sequence } = await ctx.sql.begin(async (tx) => {
    const [endpoint] = await tx<{ id: string }[]>`
      select id from endpoints
      where project_id = ${access.projectId} and line_key = ${line} and path = ${path}
      for update`;
    if (!endpoint) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
    await tx`delete from signing_secrets where endpoint_id = ${endpoint.id} and expires_at <= ${now}`;
    const previous = await tx<{ expiresAt: Date }[]>`
      update signing_secrets set expires_at = least(coalesce(expires_at, ${overlapEnd}), ${overlapEnd})
      where endpoint_id = ${endpoint.id}
      returning expires_at`;
    const signingSecret = await addSigningSecret(tx, ctx.sealingKey, endpoint.id, now);
    const latest = previous.reduce<Date | null>(
      (max, row) => (max === null || row.expiresAt > max ? row.expiresAt : max),
      null,
    );
    return {
      rotated: { signingSecret, previousExpiresAt: latest },
      sequence: await recordChange(tx, access.projectId, "routing"),
    };
  });
  await waitForEdges(ctx.sql, sequence);
  return rotated;
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
 * A project's live secrets by endpoint, opened to their key bytes: for the edge's project state
 * only (the edge signs what it streams), never for a member.
 */
export async function projectSigningSecrets(
  sql: Sql,
  sealingKey: CryptoKey,
  projectId: string,
  now: Date,
): Promise<EndpointSigningSecrets[]> {
  const rows = await sql<(SealedSigningSecret & { lineKey: string; path: string })[]>`
    select e.line_key, e.path, s.id, s.sealed_secret, s.expires_at
    from signing_secrets s join endpoints e on e.id = s.endpoint_id
    where e.project_id = ${projectId} and (s.expires_at is null or s.expires_at > ${now})
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
