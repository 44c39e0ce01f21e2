/**
 * The edges' demand on each endpoint (migration 015), in Postgres so that every control plane
 * splits an endpoint's limit from the same reports, on Postgres's clock.
 */
import type { EdgeDemand } from "../core/rate-shares.ts";
import type { Sql } from "./db.ts";

type Named = { project: string; line: string; path: string };

const columnsOf = (endpoints: Named[]) =>
  [
    endpoints.map((e) => e.project),
    endpoints.map((e) => e.line),
    endpoints.map((e) => e.path),
  ] as const;

/** For each endpoint, in order, the edges that reported it within `windowMs`. */
export async function recentDemand(
  sql: Sql,
  endpoints: Named[],
  windowMs: number,
): Promise<EdgeDemand[][]> {
  const counted = endpoints.map((): EdgeDemand[] => []);
  if (endpoints.length === 0) return counted;
  const [projects, lines, paths] = columnsOf(endpoints);
  const rows = await sql<{ ordinal: number; edgeId: string; perSecond: number }[]>`
    select e.ordinal::int, r.edge_id, r.per_second
    from unnest(${projects}::text[], ${lines}::text[], ${paths}::text[])
      with ordinality as e(project, line, path, ordinal)
    join rate_demand r using (project, line, path)
    where r.reported_at > now() - ${windowMs} * interval '1 millisecond'`;
  for (const row of rows) counted[row.ordinal - 1]?.push(row);
  return counted;
}

/** Keeps `edgeId`'s demand on each endpoint, as of now. */
export async function recordDemand(
  sql: Sql,
  edgeId: string,
  demands: (Named & { perSecond: number })[],
): Promise<void> {
  if (demands.length === 0) return;
  const [projects, lines, paths] = columnsOf(demands);
  await sql`
    insert into rate_demand (project, line, path, edge_id, per_second, reported_at)
    select project, line, path, ${edgeId}, per_second, now()
    from unnest(${projects}::text[], ${lines}::text[], ${paths}::text[],
      ${demands.map((d) => d.perSecond)}::float8[]) as d(project, line, path, per_second)
    on conflict (project, line, path, edge_id) do update set
      per_second = excluded.per_second, reported_at = excluded.reported_at`;
}

/** Edges holding a live lease on the change feed. */
export async function liveEdgeCount(sql: Sql): Promise<number> {
  const [live] = await sql<{ count: number }[]>`
    select count(*)::int as count from edge_leases where lease_expires_at > now()`;
  return live?.count ?? 0;
}

/** Deletes reports older than `retentionMs`: their edges stopped serving those endpoints. */
export async function pruneRateDemand(sql: Sql, retentionMs: number): Promise<number> {
  const pruned = await sql`
    delete from rate_demand where reported_at < now() - ${retentionMs} * interval '1 millisecond'`;
  return pruned.count;
}
