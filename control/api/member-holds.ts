/**
 * What a delivery a member starts (a replay, a send-again) reserves, as the edge reserves a call
 * it queues (./reservations.ts): refused while the project's waiting deliveries fill its cap
 * (409), a place under the cap for each target that holds its deliveries now, and its credits
 * held (402 when they do not fit). Not the caller's rate limit or IP allowlist: those guard the
 * edge's callers, not the project's members.
 */
import { type CreditHold, isMetered } from "../../core/billing.ts";
import { RelayError } from "../../core/errors.ts";
import type { KeyMode, Plan } from "../../core/model.ts";
import { heldPlaces, waitingCapMessage } from "../../core/waiting.ts";
import { heldTargetIds } from "../../store/circuits.ts";
import { reserveCredits } from "../../store/credits.ts";
import type { Queryable } from "../../store/db.ts";
import { admitHeld, capOf, heldCount } from "../../store/waiting.ts";
import type { Ctx } from "./context.ts";

export interface MemberDelivery {
  requestId: string;
  pool: KeyMode;
  /** The deliveries' credits, were the pool metered. */
  holds: CreditHold[];
  /** A replay's number: its holds are its own (store/credits.ts). */
  replay?: number;
  /**
   * The workflow that delivers it and its targets: those held now take their places under the
   * cap, as the workflow's (null for an ordered one: its lane counts it).
   */
  waits: { workflowId: string; targets: readonly { id: string; deliveryMode: string }[] } | null;
}

/** Reserves `delivery` in the caller's transaction, or throws why not. */
export async function reserveMemberDelivery(
  ctx: Pick<Ctx, "waitingCaps" | "now">,
  tx: Queryable,
  project: { projectId: string; slug: string; plan: Plan },
  { holds, waits, ...delivery }: MemberDelivery,
): Promise<void> {
  const cap = await capOf(tx, project.projectId, ctx.waitingCaps);
  const held = waits
    ? heldPlaces(waits.targets, new Set(await heldTargetIds(tx, project.projectId)))
    : [];
  const placed =
    held.length > 0 && waits
      ? await admitHeld(
          tx,
          {
            projectId: project.projectId,
            requestId: waits.workflowId,
            targetIds: held,
            now: ctx.now(),
            cap,
          },
          ctx.waitingCaps,
        )
      : (await heldCount(tx, project.projectId)) < cap;
  if (!placed) throw new RelayError("limit_exceeded", waitingCapMessage(cap));
  if (!isMetered(project.plan, delivery.pool) || holds.length === 0) return;
  if (!(await reserveCredits(tx, { project: project.slug, holds, ...delivery }))) {
    throw new RelayError(
      "insufficient_credits",
      `the ${delivery.pool} credit pool has too few credits left`,
    );
  }
}
