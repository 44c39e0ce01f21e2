/**
 * The request log as the management API reads it: a project's requests with their attempts and
 * the targets they wait for, page by page, and its attempts counted per hour. The log's writes
 * are in ./request-log.ts.
 */
import { type Hold, holdOf, type TargetGateState } from "../core/circuit.ts";
import type { RequestStatus } from "../core/model.ts";
import { gateColumns } from "./circuits.ts";
import type { Sql } from "./db.ts";
import { delivered } from "./request-log.ts";

export interface AttemptView {
  targetId: string;
  targetName: string;
  attempt: number;
  startedAt: Date;
  statusCode: number | null;
  /** Null while the attempt is in flight (or was lost with its worker). */
  latencyMs: number | null;
  error: string | null;
}

export interface RequestView {
  requestId: string;
  status: RequestStatus;
  line: string;
  endpoint: string;
  receivedAt: Date;
  /** A delayed request's time; null for one delivered at once. */
  notBefore: Date | null;
  /** The W3C trace of its spans (32 hex digits); null when the edge did not trace it. */
  traceId: string | null;
  updatedAt: Date;
  bodyBytes: number;
  attempts: AttemptView[];
  /** Targets this request waits for, and why (an open circuit, disabled, paused). */
  waiting: { targetId: string; targetName: string; reason: Hold }[];
}

export interface RequestFilter {
  statuses: RequestStatus[];
  endpoint?: { line: string; path: string } | undefined;
  /** Only requests before this (receivedAt, id), newest first: the page after a cursor. */
  before?: [string, string] | undefined;
  limit: number;
}

/** A project's requests, newest first. */
export function listRequests(
  sql: Sql,
  projectId: string,
  { statuses, endpoint, before, limit }: RequestFilter,
): Promise<RequestView[]> {
  return selectRequests(
    sql,
    projectId,
    sql`
      and status in ${sql(statuses.length > 0 ? statuses : ["none"])}
      ${endpoint === undefined ? sql`` : sql`and line_key = ${endpoint.line} and endpoint_path = ${endpoint.path}`}
      ${before === undefined ? sql`` : sql`and (received_at, id) < (${before[0]}::timestamptz, ${before[1]})`}
      order by received_at desc, id desc
      limit ${limit}`,
  );
}

export async function findRequest(
  sql: Sql,
  projectId: string,
  requestId: string,
): Promise<RequestView | undefined> {
  const [request] = await selectRequests(sql, projectId, sql`and id = ${requestId}`);
  return request;
}

/** A project's requests matching `filter` (a fragment after the project condition). */
async function selectRequests(
  sql: Sql,
  projectId: string,
  filter: ReturnType<Sql>,
): Promise<RequestView[]> {
  const requests = await sql<Omit<RequestView, "attempts" | "waiting">[]>`
    select id as request_id, status, line_key as line, endpoint_path as endpoint, received_at,
      not_before, trace_id, updated_at, body_bytes
    from requests where project_id = ${projectId} ${filter}`;
  if (requests.length === 0) return [];
  const ids = requests.map((r) => r.requestId);
  const attempts = await sql<(AttemptView & { requestId: string })[]>`
    select request_id, target_id, target_name, attempt, started_at, status_code, latency_ms, error
    from attempts where request_id in ${sql(ids)}
    order by id`;
  const held = await heldFor(sql, ids);
  return requests.map((request) => ({
    ...request,
    attempts: attempts
      .filter((a) => a.requestId === request.requestId)
      .map(({ requestId: _, ...attempt }) => attempt),
    waiting: held
      .filter((h) => h.requestId === request.requestId)
      .flatMap(({ requestId: _, targetId, targetName, ...gate }) => {
        const reason = holdOf(gate);
        return reason ? [{ targetId, targetName, reason }] : [];
      }),
  }));
}

export interface DeliveryHour {
  /** The hour's start. */
  hour: Date;
  /** Attempts whose target answered 2xx in this hour. */
  delivered: number;
  /** Attempts that ended in this hour without a 2xx answer. */
  failedAttempts: number;
}

/**
 * A project's attempts per hour, oldest first, for the `hours` hours ending with `now`'s. An
 * attempt counts in the hour it started; one still in flight (no latency yet) counts nowhere.
 */
export async function deliveriesPerHour(
  sql: Sql,
  projectId: string,
  now: Date,
  hours: number,
): Promise<DeliveryHour[]> {
  const rows = await sql<{ hour: Date; delivered: string; failedAttempts: string }[]>`
    with hours as (
      select generate_series(
        date_trunc('hour', ${now}::timestamptz) - make_interval(hours => ${hours - 1}),
        date_trunc('hour', ${now}::timestamptz),
        interval '1 hour') as hour
    ), counted as (
      select date_trunc('hour', a.started_at) as hour,
        count(*) filter (where ${delivered(sql)}) as delivered,
        count(*) filter (where a.latency_ms is not null and not ${delivered(sql)}) as failed_attempts
      from attempts a join requests r on r.id = a.request_id
      where r.project_id = ${projectId} and a.started_at >= (select min(hour) from hours)
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

/** The deliveries of these requests that wait for their target, with the target's state. */
function heldFor(sql: Sql, requestIds: string[]) {
  return sql<(TargetGateState & { requestId: string; targetId: string; targetName: string })[]>`
    select h.workflow_id as request_id, h.target_id, t.name as target_name, ${gateColumns(sql)}
    from held_deliveries h join targets t on t.id = h.target_id
      join endpoints e on e.id = t.endpoint_id
      left join target_circuits c on c.target_id = h.target_id
    where h.workflow_id in ${sql(requestIds)}`;
}
