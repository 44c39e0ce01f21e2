/**
 * What a delivery a member starts (a replay, a send-again) reserves, as the edge reserves a call
 * it queues (./reservations.ts): refused while the project's waiting deliveries fill its cap
 * (409), and its credits held (402 when they do not fit). Not the caller's rate limit or IP
 * allowlist: those guard the edge's callers, not the project's members.
 */
import { type CreditHold, isMetered } from "../../core/billing.ts";
import { RelayError } from "../../core/errors.ts";
import type { KeyMode, Plan } from "../../core/model.ts";
import { waitingCapMessage } from "../../core/waiting.ts";
import { reserveCredits } from "../../store/credits.ts";
import type { Queryable } from "../../store/db.ts";
import { capOf, heldCount } from "../../store/waiting.ts";
import type { Ctx } from "./context.ts";

export interface MemberDelivery {
  requestId: string;
  pool: KeyMode;
  /** The deliveries' credits, were the pool metered. */
  holds: CreditHold[];
  /** A replay's number: its holds are its own (store/credits.ts). */
  replay?: number;
}

/** Reserves `delivery` in `q` (the caller's transaction, when it has one), or throws why not. */
export async function reserveMemberDelivery(
  ctx: Pick<Ctx, "waitingCaps">,
  q: Queryable,
  project: { projectId: string; slug: string; plan: Plan },
  { holds, ...delivery }: MemberDelivery,
): Promise<void> {
  const cap = await capOf(q, project.projectId, ctx.waitingCaps);
  if ((await heldCount(q, project.projectId)) >= cap) {
    throw new RelayError("limit_exceeded", waitingCapMessage(cap));
  }
  if (!isMetered(project.plan, delivery.pool) || holds.length === 0) return;
  if (!(await reserveCredits(q, { project: project.slug, holds, ...delivery }))) {
    throw new RelayError(
      "insufficient_credits",
      `the ${delivery.pool} credit pool has too few credits left`,
    );
  }
}
