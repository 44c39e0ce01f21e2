/**
 * The edges' demand on each endpoint (migration 015), in Postgres so that every control plane
 * splits an endpoint's limit from the same reports, on Postgres's clock.
 */
import type { EdgeDemand } from "../core/rate-shares.ts";
import type { Sql } from "./db.ts";

/**
 * Records `edgeId`'s demand on each endpoint and answers, for each in the same order, the edges
 * that had reported it within `windowMs` before (this one included when it had), and how many
 * edges hold a live lease.
 */
export async function exchangeDemand(
  sql: Sql,
  edgeId: string,
  demands: { project: string; line: string; path: string; perSecond: number }[],
  windowMs: number,
): Promise<{ counted: EdgeDemand[][]; liveEdges: number }> {
  const [live] = await sql<{ count: number }[]>`
    select count(*)::int as count from edge_leases where lease_expires_at > now()`;
  const liveEdges = live?.count ?? 0;
  if (demands.length === 0) return { counted: [], liveEdges };
  const columns = [
    demands.map((d) => d.project),
    demands.map((d) => d.line),
    demands.map((d) => d.path),
  ] as const;
  const rows = await sql<{ ordinal: number; edgeId: string; perSecond: number }[]>`
    select e.ordinal::int, r.edge_id, r.per_second
    from unnest(${columns[0]}::text[], ${columns[1]}::text[], ${columns[2]}::text[])
      with ordinality as e(project, line, path, ordinal)
    join rate_demand r using (project, line, path)
    where r.reported_at > now() - ${windowMs} * interval '1 millisecond'`;
  await sql`
    insert into rate_demand (project, line, path, edge_id, per_second, reported_at)
    select project, line, path, ${edgeId}, per_second, now()
    from unnest(${columns[0]}::text[], ${columns[1]}::text[], ${columns[2]}::text[],
      ${demands.map((d) => d.perSecond)}::float8[]) as d(project, line, path, per_second)
    on conflict (project, line, path, edge_id) do update set
      per_second = excluded.per_second, reported_at = excluded.reported_at`;
  const counted = demands.map((): EdgeDemand[] => []);
  for (const row of rows) counted[row.ordinal - 1]?.push(row);
  return { counted, liveEdges };
}

/** Deletes reports older than `retentionMs`: their edges stopped serving those endpoints. */
export async function pruneRateDemand(sql: Sql, retentionMs: number): Promise<number> {
  const pruned = await sql`
    delete from rate_demand where reported_at < now() - ${retentionMs} * interval '1 millisecond'`;
  return pruned.count;
}
