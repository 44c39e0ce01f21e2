/**
 * The daily auto-rotation: every active key within 7 days of its expiry and without a successor
 * gets one, its plaintext sealed until its one reveal, its lifetime within the project's cap.
 * Idempotent: a second run the same day finds the successors the first one made.
 */
import type { Policy } from "../core/model.ts";
import { autoRotationLifetimeDays, DAY_MS, lifetimeDays } from "../core/policy.ts";
import { seal } from "../core/sealing.ts";
import type { Sql } from "./db.ts";
import { insertKey } from "./keys.ts";

export const ROTATION_LEAD_MS = 7 * DAY_MS;

export async function rotateExpiringKeys(
  sql: Sql,
  now: Date,
  sealingKey: CryptoKey,
): Promise<number> {
  const due = await sql<{ id: string }[]>`
    select k.id from api_keys k
    where k.revoked_at is null and k.expires_at > ${now}
      and k.expires_at <= ${new Date(now.getTime() + ROTATION_LEAD_MS)}
      and not exists (select 1 from api_keys s where s.predecessor_id = k.id)`;
  let rotated = 0;
  for (const { id } of due) {
    const made = await sql.begin(async (tx) => {
      // Locked and checked again: a concurrent run may have rotated it meanwhile.
      const [key] = await tx<
        (Policy & {
          projectId: string;
          name: string;
          mode: "live" | "test";
          createdAt: Date;
          expiresAt: Date;
        })[]
      >`
        select k.project_id, k.name, k.mode, k.created_at, k.expires_at,
          p.default_key_ttl_days, p.max_key_ttl_days, p.editors_may_create_non_expiring_keys
        from api_keys k join projects p on p.id = k.project_id
        where k.id = ${id}
          and not exists (select 1 from api_keys s where s.predecessor_id = k.id)
        for update of k`;
      if (!key) return false;
      await insertKey(tx, now, {
        projectId: key.projectId,
        name: key.name,
        mode: key.mode,
        lifetime: autoRotationLifetimeDays(key, lifetimeDays(key.createdAt, key.expiresAt)),
        predecessorId: id,
        seal: (successorId, plaintext) => seal(sealingKey, plaintext, successorId),
      });
      return true;
    });
    if (made) rotated++;
  }
  return rotated;
}
