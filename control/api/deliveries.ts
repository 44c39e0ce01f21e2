/** Deliveries per hour, counted from the attempt log, for the panel's usage chart. */
import { z } from "zod";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export interface DeliveryHour {
  /** The hour's start. */
  hour: Date;
  /** Deliveries whose target answered 2xx in this hour. */
  delivered: number;
  /** Attempts that ended in this hour without a 2xx answer. */
  failedAttempts: number;
}

const historySchema = z.object({
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
  const { hours } = parseInput(historySchema, query);
  const now = ctx.now();
  const rows = await ctx.sql<{ hour: Date; delivered: string; failedAttempts: string }[]>`
    with hours as (
      select generate_series(
        date_trunc('hour', ${now}::timestamptz) - make_interval(hours => ${hours - 1}),
        date_trunc('hour', ${now}::timestamptz),
        interval '1 hour') as hour
    ), counted as (
      select date_trunc('hour', a.started_at) as hour,
        count(*) filter (where a.status_code between 200 and 299) as delivered,
        count(*) filter (
          where a.latency_ms is not null
            and (a.status_code is null or a.status_code not between 200 and 299)
        ) as failed_attempts
      from attempts a join requests r on r.id = a.request_id
      where r.project_id = ${access.projectId} and a.started_at >= (select min(hour) from hours)
      group by 1
    )
    select h.hour, coalesce(c.delivered, 0) as delivered,
      coalesce(c.failed_attempts, 0) as failed_attempts
    from hours h left join counted c on c.hour = h.hour
    order by h.hour`;
  return rows.map((row) => ({
    hour: row.hour,
    delivered: Number(row.delivered),
    failedAttempts: Number(row.failedAttempts),
  }));
}
