/**
 * The request log as the management API reads it: a project's requests with their attempts and
 * the targets they wait for, page by page, and its attempts counted per hour. A single request's
 * read also has what the log keeps of it (issue 28): its headers and body as received, and each
 * attempt's answer. The log's writes are in ./request-log.ts.
 */
import { type Hold, holdOf, type TargetGateState } from "../core/circuit.ts";
import type { SkippedTarget } from "../core/delivery.ts";
import { THROTTLED } from "../core/flow.ts";
import { type LoggedBody, loggedBody } from "../core/inspect.ts";
import type { KeyMode, RequestStatus } from "../core/model.ts";
import { type CallbackView, callbacksOf } from "./callbacks.ts";
import { gateColumns } from "./circuits.ts";
import type { Queryable, Sql } from "./db.ts";
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
  /** A single request's read only: the target's answer; null when it did not answer. */
  response?: AttemptResponse | null;
}

export interface AttemptResponse {
  headers: Record<string, string>;
  /** Its first 64 KiB. */
  body: LoggedBody;
  /** The answer was longer than 64 KiB. */
  truncated: boolean;
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
  /** The caller's Idempotency-Key, when it sent one. */
  idempotencyKey: string | null;
  /** The request this one was sent again from. */
  resentFrom: string | null;
  /** When its headers, body and answers were erased (store/content-erase.ts); null: kept. */
  contentErasedAt: Date | null;
  /** A single request's read only: the headers forwarded to targets; null when not kept. */
  headers?: Record<string, string> | null;
  /** A single request's read only: the body as received; null when not kept. */
  body?: LoggedBody | null;
  attempts: AttemptView[];
  /** A single request's read only: its completion callbacks (store/callbacks.ts), each's last try. */
  callbacks?: CallbackView[];
  /** Targets the call skipped, and why (their filters do not match it). */
  skipped: SkippedTarget[];
  /** Targets this request waits for, and why (an open circuit, disabled, paused). */
  waiting: { targetId: string; targetName: string; reason: Hold | typeof THROTTLED }[];
}

export interface RequestFilter {
  statuses: RequestStatus[];
  endpoint?: { line: string; path: string } | undefined;
  requestId?: string | undefined;
  idempotencyKey?: string | undefined;
  /** Requests with an attempt its target answered with this status code. */
  targetStatus?: number | undefined;
  /** Received at or after this. */
  receivedFrom?: Date | undefined;
  /** Received before this. */
  receivedTo?: Date | undefined;
  /** Only requests before this (receivedAt, id), newest first: the page after a cursor. */
  before?: [string, string] | undefined;
  limit: number;
}

/**
 * A project's requests, newest first: along its (project, received) index whatever the filter,
 * and for a target's status code each request's attempts by their (request) index; an
 * Idempotency-Key has an index of its own.
 */
export function listRequests(
  sql: Sql,
  projectId: string,
  filter: RequestFilter,
): Promise<RequestView[]> {
  const { before, limit } = filter;
  return selectRequests(
    sql,
    projectId,
    sql`
      ${requestConditions(sql, filter)}
      ${before === undefined ? sql`` : sql`and (received_at, id) < (${before[0]}::timestamptz, ${before[1]})`}
      order by received_at desc, id desc
      limit ${limit}`,
  );
}

/**
 * A filter's conditions on `requests` (unaliased), each `and ...`, after its project's: the
 * request log's list and a recovery job's matches (store/recoveries.ts) read the same.
 */
export function requestConditions(sql: Queryable, filter: Omit<RequestFilter, "before" | "limit">) {
  const { statuses, endpoint, requestId, idempotencyKey, targetStatus } = filter;
  const { receivedFrom, receivedTo } = filter;
  const when = (value: unknown, fragment: () => ReturnType<Sql>) =>
    value === undefined ? sql`` : fragment();
  return sql`
    and status in ${sql(statuses.length > 0 ? statuses : ["none"])}
    ${when(endpoint, () => sql`and line_key = ${endpoint?.line ?? ""} and endpoint_path = ${endpoint?.path ?? ""}`)}
    ${when(requestId, () => sql`and id = ${requestId ?? ""}`)}
    ${when(idempotencyKey, () => sql`and idempotency_key = ${idempotencyKey ?? ""}`)}
    ${when(
      targetStatus,
      () => sql`and exists (select 1 from attempts a
        where a.request_id = requests.id and a.status_code = ${targetStatus ?? 0})`,
    )}
    ${when(receivedFrom, () => sql`and received_at >= ${receivedFrom ?? null}`)}
    ${when(receivedTo, () => sql`and received_at < ${receivedTo ?? null}`)}`;
}

/** One request, with what the log keeps of it: its headers, its body and its attempts' answers. */
export async function findRequest(
  sql: Sql,
  projectId: string,
  requestId: string,
): Promise<RequestView | undefined> {
  const [request] = await selectRequests(sql, projectId, sql`and id = ${requestId}`, true);
  return request;
}

interface ContentRow {
  headers?: Record<string, string> | null;
  body?: Buffer | null;
}

interface AnswerRow {
  responseHeaders?: Record<string, string> | null;
  responseBody?: Buffer | null;
  responseTruncated?: boolean;
}

/**
 * A project's requests matching `filter` (a fragment after the project condition); `content`:
 * with their headers, body (inline, or stored by reference in `bodies`) and answers.
 */
async function selectRequests(
  sql: Sql,
  projectId: string,
  filter: ReturnType<Sql>,
  content = false,
): Promise<RequestView[]> {
  const requests = await sql<(Omit<RequestView, "attempts" | "waiting" | "body"> & ContentRow)[]>`
    select id as request_id, status, line_key as line, endpoint_path as endpoint, received_at,
      not_before, trace_id, updated_at, body_bytes, idempotency_key, resent_from,
      content_erased_at, coalesce(skipped, '[]') as skipped
      ${
        content
          ? sql`, headers, coalesce(body,
              (select b.body from bodies b where b.request_id = coalesce(requests.body_ref, requests.id))) as body`
          : sql``
      }
    from requests where project_id = ${projectId} ${filter}`;
  if (requests.length === 0) return [];
  const ids = requests.map((r) => r.requestId);
  const attempts = await sql<(Omit<AttemptView, "response"> & AnswerRow & { requestId: string })[]>`
    select request_id, target_id, target_name, attempt, started_at, status_code, latency_ms, error
      ${content ? sql`, response_headers, response_body, response_truncated` : sql``}
    from attempts where request_id in ${sql(ids)}
    order by id`;
  const [held, callbacks] = await Promise.all([
    heldFor(sql, ids),
    content ? callbacksOf(sql, ids) : [],
  ]);
  return requests.map(({ body, ...request }) => ({
    ...request,
    ...(content && {
      body: body ? loggedBody(body) : null,
      callbacks: callbacks
        .filter((c) => c.requestId === request.requestId)
        .map(({ requestId: _, ...callback }) => callback),
    }),
    attempts: attempts
      .filter((a) => a.requestId === request.requestId)
      .map(({ requestId: _, ...attempt }) => (content ? withAnswer(attempt) : attempt)),
    waiting: held
      .filter((h) => h.requestId === request.requestId)
      .flatMap(({ requestId: _, targetId, targetName, limited, ...gate }) => {
        // Nothing holds the target: its flow limits do (core/flow.ts).
        const reason = holdOf(gate) ?? (limited ? THROTTLED : null);
        return reason ? [{ targetId, targetName, reason }] : [];
      }),
  }));
}

/** An attempt's answer as the API shows it, from its row's columns. */
function withAnswer({
  responseHeaders,
  responseBody,
  responseTruncated,
  ...attempt
}: Omit<AttemptView, "response"> & AnswerRow): AttemptView {
  const response = responseHeaders
    ? {
        headers: responseHeaders,
        body: loggedBody(responseBody ?? new Uint8Array()),
        truncated: responseTruncated ?? false,
      }
    : null;
  return { ...attempt, response };
}

/** The credit pool a logged request was billed to: its key's mode. */
export async function keyModeOf(
  sql: Sql,
  projectId: string,
  requestId: string,
): Promise<KeyMode | undefined> {
  const [row] = await sql<{ keyMode: KeyMode }[]>`
    select key_mode from requests where project_id = ${projectId} and id = ${requestId}`;
  return row?.keyMode;
}

/** The targets of a request with an attempt that delivered: what a replay leaves out. */
export async function deliveredTargets(sql: Sql, requestId: string): Promise<string[]> {
  const rows = await sql<{ targetId: string }[]>`
    select distinct target_id from attempts where request_id = ${requestId} and ${delivered(sql)}`;
  return rows.map((row) => row.targetId);
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
  return sql<
    (TargetGateState & {
      requestId: string;
      targetId: string;
      targetName: string;
      limited: boolean;
    })[]
  >`
    select h.request_id, h.target_id, t.name as target_name, ${gateColumns(sql)},
      t.max_deliveries_per_second is not null or t.max_concurrent is not null as limited
    from held_deliveries h join targets t on t.id = h.target_id
      join endpoints e on e.id = t.endpoint_id
      left join target_circuits c on c.target_id = h.target_id
    where h.request_id in ${sql(requestIds)}`;
}
