/**
 * Idempotency-Keys claimed in Postgres (migration 023), for calls to async-only, unordered
 * endpoints: a call that shares a batch workflow is told apart from its repeats here, in the
 * transaction that keeps its start, since the batch's workflow id is not its own. A call that
 * goes as a workflow of its own claims its key too, so a repeat that would share a batch takes
 * its way instead (where Temporal's workflow id tells them apart).
 */
import type { KeyClaim, KeyClaimOutcome } from "../core/idempotency.ts";
import type { Queryable } from "./db.ts";

/**
 * Claims each key for its call, `ownWorkflow` saying which way the calls go; answers, per claim
 * in order, what an earlier claim of the same key makes of it ("claimed" when there was none).
 * A claim waits for a concurrent one of its key to commit or roll back.
 */
export async function claimKeys(
  q: Queryable,
  project: string,
  claims: readonly KeyClaim[],
  ownWorkflow: boolean,
): Promise<KeyClaimOutcome[]> {
  if (claims.length === 0) return [];
  const ids = claims.map((c) => c.requestId);
  const claimed = await q<{ requestId: string }[]>`
    insert into idempotency_keys (request_id, project_id, body_tag, own_workflow)
    select c.request_id, p.id, c.body_tag, ${ownWorkflow}
    from projects p,
      unnest(${ids}::text[], ${claims.map((c) => c.bodyTag)}::text[]) as c(request_id, body_tag)
    where p.slug = ${project}
    on conflict (request_id) do nothing
    returning request_id`;
  const mine = new Set(claimed.map((row) => row.requestId));
  const earlier = new Map(
    mine.size === claims.length
      ? []
      : (
          await q<{ requestId: string; bodyTag: string; ownWorkflow: boolean }[]>`
            select request_id, body_tag, own_workflow from idempotency_keys
            where request_id = any(${ids.filter((id) => !mine.has(id))}::text[])`
        ).map((row) => [row.requestId, row]),
  );
  return claims.map(({ requestId, bodyTag }) => {
    if (mine.has(requestId)) return "claimed";
    const first = earlier.get(requestId);
    if (!first) return "claimed"; // its project is gone: nothing is kept for it either
    if (first.ownWorkflow) return "own_workflow";
    return first.bodyTag === bodyTag ? "repeat" : "reused";
  });
}

/**
 * Forgets keys claimed before `cutoff` whose request is not still under way; a batch of at most
 * `limit`, answering how many.
 */
export async function pruneKeys(q: Queryable, cutoff: Date, limit: number): Promise<number> {
  const deleted = await q`
    delete from idempotency_keys where request_id in (
      select k.request_id from idempotency_keys k
      where k.claimed_at < ${cutoff}
        and not exists (
          select 1 from requests r
          where r.id = k.request_id
            and r.status not in ('delivered', 'partially_failed', 'failed', 'cancelled'))
      limit ${limit})`;
  return deleted.count;
}

/** Forgets claims made in a transaction whose calls then went another way (not accepted). */
export async function forgetKeys(q: Queryable, claims: readonly KeyClaim[]): Promise<void> {
  if (claims.length === 0) return;
  await q`delete from idempotency_keys where request_id = any(${claims.map((c) => c.requestId)}::text[])`;
}
