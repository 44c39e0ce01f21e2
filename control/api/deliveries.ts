/** Deliveries per hour, counted from the attempt log, for the panel's usage chart. */
import { z } from "zod";
import { type DeliveryHour, deliveriesPerHour } from "../../store/request-views.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export const deliveryHistoryQuery = z.object({
  hours: z.coerce.number().int().min(1).max(168).default(24),
});

/**
 * One entry per hour, oldest first, ending with the current hour (by the control plane's clock,
 * so the dev clock moves it too). An attempt counts in the hour it started; one still in flight
 * (no latency yet) counts nowhere.
 */
export async function deliveryHistory(
  ctx: Ctx,
  slug: string,
  query: unknown,
): Promise<DeliveryHour[]> {
  const access = await projectAccess(ctx, slug);
  const { hours } = parseInput(deliveryHistoryQuery, query);
  return deliveriesPerHour(ctx.sql, access.projectId, ctx.now(), hours);
}
