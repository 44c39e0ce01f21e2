/**
 * Each endpoint's delivery signing secrets: created with the endpoint, rotated with an overlap,
 * shown only in those two answers. Stored sealed (AES-256-GCM, the row id as context); the worker
 * opens them per attempt, and the edge gets the live ones' bytes in its project state.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { DEFAULT_OVERLAP_SECONDS, MAX_OVERLAP_SECONDS } from "../../core/signing.ts";
import { waitForEdges } from "../../store/changes.ts";
import { rotateSigningSecrets } from "../../store/signing.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export interface RotatedSecret {
  /** The new `whsec_...` secret, shown this once. */
  signingSecret: string;
  /** When the previous secrets stop signing; null when there were none. */
  previousExpiresAt: Date | null;
}

export const rotateSigningSecretBody = z.strictObject({
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
  const { overlapSeconds } = parseInput(rotateSigningSecretBody, input === undefined ? {} : input);
  const now = ctx.now();
  const overlapEnd = new Date(now.getTime() + overlapSeconds * 1000);
  const rotated = await rotateSigningSecrets(
    ctx.sql,
    ctx.sealingKey,
    { projectId: access.projectId, line, path },
    now,
    overlapEnd,
  );
  if (!rotated) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  await waitForEdges(ctx.sql, rotated.sequence);
  return { signingSecret: rotated.signingSecret, previousExpiresAt: rotated.previousExpiresAt };
}
