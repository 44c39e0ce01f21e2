/**
 * The request log: a row per request and one per attempt at each of its targets. The worker
 * writes it (opens a request, settles it; its attempts are ./attempt-log.ts's), the control plane
 * writes the streams edges report (`recordStream`) and begins a request's replays; the
 * management API reads it through ./request-views.ts. What "delivered" means in SQL is written
 * once here (`delivered`); store/retention.ts prunes the log.
 */
import {
  answeredStatus,
  type DeliveryInput,
  type SkippedRecord,
  type StreamRecord,
} from "../core/delivery.ts";
import { type DeliveryTarget, finishedStatuses, type RequestStatus } from "../core/model.ts";
import {
  balancesAfter,
  ledgerCharges,
  noteEmptiedPools,
  releaseDeliveryHolds,
  releaseHolds,
} from "./credits.ts";
import { pipelinedTransaction, type Queryable, type Sql } from "./db.ts";
import { forgetWaiting, type PlanCaps, releasePlaces } from "./waiting.ts";

/**
 * An attempt delivered: its target answered 2xx, as core's `classifyStatus` says. Never null: an
 * attempt with no answer (in flight, lost, refused, unreachable) did not deliver. Reads the
 * `attempts` row in scope.
 */
export const delivered = (q: Queryable) => q`coalesce(status_code between 200 and 299, false)`;

/** A request as the log opens it: the delivery input without what only its calls need. */
export type RequestOpening = Omit<DeliveryInput, "targets" | "headers" | "bodyBase64" | "body">;

/**
 * The statuses a request is opened in: waiting for its time, delivering, cancelled, or skipped by
 * every target.
 */
type Opening = Extract<RequestStatus, "scheduled" | "delivering" | "cancelled" | "skipped">;

/**
 * What the log keeps of a request as received, for whoever inspects it: its headers as
 * forwarded, and its body when it travelled inline (one stored by reference stays in `bodies`).
 */
export interface Received {
  headers: Record<string, string>;
  /** Null when the body waits in Postgres by reference. */
  bodyBase64: string | null;
  /** The body's key in `bodies`, when it waits there (./bodies.ts). */
  bodyRef: string | null;
}

/**
 * Opens requests in the log. Idempotent: a retried or replayed open leaves the row as it is,
 * except that a scheduled request starts delivering when its time comes, a cancel ends any, and
 * what was received is kept by the first open that knows it (a delayed request's first attempt).
 * A statement may not touch a row twice: the openings name distinct requests.
 */
export const insertRequests = (
  q: Queryable,
  openings: readonly (RequestOpening & { received?: Received | undefined })[],
  status: Opening = "delivering",
) => {
  const advances = q`(excluded.status = 'cancelled'
    or (requests.status = 'scheduled' and excluded.status = 'delivering'))`;
  return q`
  insert into requests (id, project_id, line_key, endpoint_path, key_mode, status,
    body_bytes, received_at, not_before, trace_id, idempotency_key, resent_from, headers, body,
    body_ref, skipped)
  select o.id, p.id, o.line_key, o.endpoint_path, o.key_mode, ${status}, o.body_bytes,
    o.received_at, o.not_before, o.trace_id, o.idempotency_key, o.resent_from, o.headers::jsonb,
    decode(o.body, 'base64'), o.body_ref, o.skipped::jsonb
  from unnest(${openings.map((o) => o.requestId)}::text[], ${openings.map((o) => o.project)}::text[],
    ${openings.map((o) => o.line)}::text[], ${openings.map((o) => o.endpoint)}::text[],
    ${openings.map((o) => o.keyMode)}::text[], ${openings.map((o) => o.bodyBytes)}::int[],
    ${openings.map((o) => o.receivedAt)}::timestamptz[],
    ${openings.map((o) => o.notBefore ?? null)}::timestamptz[],
    ${openings.map((o) => o.traceId ?? null)}::text[],
    ${openings.map((o) => o.idempotencyKey ?? null)}::text[],
    ${openings.map((o) => o.resentFrom ?? null)}::text[],
    ${openings.map((o) => (o.received ? JSON.stringify(o.received.headers) : null))}::text[],
    ${openings.map((o) => o.received?.bodyBase64 ?? null)}::text[],
    ${openings.map((o) => o.received?.bodyRef ?? null)}::text[],
    ${openings.map((o) => (o.skipped ? JSON.stringify(o.skipped) : null))}::text[])
    as o (id, project, line_key, endpoint_path, key_mode, body_bytes, received_at, not_before,
      trace_id, idempotency_key, resent_from, headers, body, body_ref, skipped)
  join projects p on p.slug = o.project
  on conflict (id) do update set
    status = case when ${advances} then excluded.status else requests.status end,
    updated_at = case when ${advances} then now() else requests.updated_at end,
    headers = coalesce(requests.headers, excluded.headers),
    body = coalesce(requests.body, excluded.body),
    body_ref = coalesce(requests.body_ref, excluded.body_ref)
  where ${advances} or (requests.headers is null and excluded.headers is not null)`;
};

const insertRequest = (
  q: Queryable,
  input: RequestOpening & { received?: Received | undefined },
  status?: Opening,
) => insertRequests(q, [input], status);

/** Opens a request: delivering, or (a delayed one) scheduled until its time. */
export async function openRequest(
  sql: Sql,
  input: RequestOpening & { received?: Received },
  status: Extract<Opening, "scheduled" | "delivering"> = "delivering",
): Promise<void> {
  await insertRequest(sql, input, status);
}

/**
 * A request cancelled before it was delivered: no further attempts will be made (its workflow
 * stopped them). Opens it, cancelled, when it was cancelled before its first task. Its credit
 * holds go back, and it waits no more, for its time or any target (store/waiting.ts). A target's
 * 2xx wins over the cancel: a request with a delivered attempt is settled from its attempts
 * instead, and is partially failed when one of its `targetIds` (its async targets) never got it,
 * tried or not (one its flow limits held). Answers the status.
 */
export async function cancelRequest(
  sql: Sql,
  input: RequestOpening,
  caps: PlanCaps,
  targetIds: readonly string[],
): Promise<RequestStatus> {
  return sql.begin(async (tx) => {
    // Locks the row, so an attempt ending now settles it after this (endAttempt).
    await insertRequest(tx, input, "cancelled");
    await releaseHolds(tx, input.requestId);
    await forgetWaiting(tx, input.requestId, caps);
    const answered = await tx<{ targetId: string }[]>`
      select distinct target_id from attempts
      where request_id = ${input.requestId} and ${delivered(tx)}`;
    if (answered.length === 0) return "cancelled";
    const got = new Set(answered.map((a) => a.targetId));
    if (targetIds.every((id) => got.has(id))) return settleRequest(tx, input.requestId, []);
    await tx`
      update requests set status = 'partially_failed', updated_at = now()
      where id = ${input.requestId}`;
    return "partially_failed";
  });
}

/**
 * Sets a request's status from all of its attempts, replays included: delivered when every
 * target it tried has a delivered attempt, failed when none has, partially failed in between. A
 * target its transformation skipped counts for neither; skipped when every one was.
 * The credits still held for `targetIds`, the deliveries settled (none charged), go back.
 */
export async function settleRequest(
  q: Queryable,
  requestId: string,
  targetIds: readonly string[],
): Promise<RequestStatus> {
  return (await settleRequests(q, [{ requestId, targetIds }])).get(requestId) ?? "failed";
}

/** A request whose deliveries to `targetIds` ended, to settle. */
export interface Settling {
  requestId: string;
  targetIds: readonly string[];
}

/**
 * `settleRequest` for many requests in two statements, whatever their number: a batch's requests
 * of several targets, whose first attempts ended them together. Answers the statuses set.
 */
export async function settleRequests(
  q: Queryable,
  settling: readonly Settling[],
): Promise<Map<string, RequestStatus>> {
  await releaseDeliveryHolds(
    q,
    settling.flatMap(({ requestId, targetIds }) =>
      targetIds.map((targetId) => ({ requestId, targetId })),
    ),
  );
  return settleStatuses(
    q,
    settling.map(({ requestId }) => requestId),
  );
}

/**
 * `settleRequest`'s status update for many requests, narrowed by `only` (a condition on the
 * request `r`, or none); answers the statuses set, by request id.
 */
export async function settleStatuses(
  q: Queryable,
  requestIds: readonly string[],
  only: ReturnType<Sql> = q``,
): Promise<Map<string, RequestStatus>> {
  if (requestIds.length === 0) return new Map();
  const rows = await q<{ id: string; status: RequestStatus }[]>`
    update requests r set status = s.status, updated_at = now()
    from (
      select request_id, case
        when bool_and(skipped) then 'skipped'
        when bool_and(delivered or skipped) then 'delivered'
        when bool_or(delivered) then 'partially_failed'
        else 'failed' end as status
      from (
        select request_id, target_id, bool_or(${delivered(q)}) as delivered,
          bool_or(skipped) as skipped
        from attempts where request_id = any(${[...new Set(requestIds)]}::text[])
        group by request_id, target_id
      ) per_target
      group by request_id
    ) s
    where r.id = s.request_id ${only}
    returning r.id, r.status`;
  return new Map(rows.map((row) => [row.id, row.status]));
}

/**
 * A call every target skipped, logged as such: nothing was queued, held or charged, so this one
 * row is all there is of it. A repeat (an edge retrying, or an Idempotency-Key's repeat, whose
 * request id is the same) changes nothing.
 */
export async function recordSkipped(sql: Sql, record: SkippedRecord): Promise<void> {
  await insertRequest(sql, record, "skipped");
}

/** A finished stream as the log keeps it: of its target, only which one it was. */
export type LoggedStream = Omit<StreamRecord, "target"> & {
  target: Pick<DeliveryTarget, "id" | "name">;
};

/**
 * A stream an edge proxied, logged whole once it ended: the request opened, its one attempt with
 * its outcome, the charge when the target answered, and the request's status when the stream owns
 * it, in one transaction. A stream is tried once, so a repeat of its record (an edge retrying a
 * call whose answer it lost) finds the attempt there and changes nothing; the request's row lock
 * orders two repeats arriving at once.
 *
 * The statements travel together, BEGIN with them (two round trips in all, three when the charge
 * empties its pool, where one per statement took eight), and Postgres runs them in order: the attempt's insert, after the lock,
 * sees an attempt a repeat committed meanwhile, and the status follows a new attempt only. The
 * charge, or the hold's release, changes nothing a second time, so it needs no such guard; a
 * request whose project is gone opens no row, and nothing of it is written.
 */
export async function recordStream(sql: Sql, record: LoggedStream): Promise<void> {
  const { target, ownsStatus, statusCode, latencyMs, bytes, error, ...request } = record;
  const { requestId } = request;
  // Its transformation dropped the call: the edge named the stream's target among the skipped.
  const dropped =
    request.skipped?.some((s) => s.targetId === target.id && s.reason === "transform") ?? false;
  const charge = {
    project: request.project,
    pool: request.keyMode,
    requestId,
    targetId: target.id,
    bytes,
  };
  await pipelinedTransaction(sql, async (tx) => {
    const attempt = tx`
      insert into attempts (request_id, target_id, target_name, attempt, started_at, status_code,
        latency_ms, error, skipped)
      select ${requestId}, ${target.id}, ${target.name}, 1, ${request.receivedAt}, ${statusCode},
        ${latencyMs}, ${error}, ${dropped}
      where exists (select 1 from requests where id = ${requestId})
        and not exists (select 1 from attempts where request_id = ${requestId}
          and target_id = ${target.id})
      returning request_id`;
    // Sent in this order (`execute`): a query waits for its `then` otherwise, and the credit
    // helpers send theirs when called.
    const written = [
      insertRequest(tx, request).execute(),
      tx`select 1 from requests where id = ${requestId} for update`.execute(),
      (ownsStatus
        ? tx`
          with attempt as (${attempt})
          update requests set status = ${dropped ? "skipped" : answeredStatus(statusCode)},
            updated_at = now()
          where id in (select request_id from attempt)`
        : attempt
      ).execute(),
    ];
    const [charged, balances] = await Promise.all([
      statusCode === null
        ? releaseHolds(tx, requestId, [target.id]).then(() => [])
        : ledgerCharges(tx, [charge]),
      statusCode === null ? [] : balancesAfter(tx, [charge]),
      ...written,
    ]);
    await noteEmptiedPools(tx, charged, balances);
  });
}

/** A replay begun: its number, and the status its request had before. */
export interface ReplayBegun {
  replay: number;
  was: RequestStatus;
}

/**
 * Begins a replay of a finished request of the project, in the caller's transaction: the request
 * is delivering again until its new attempts settle it, and the replay takes the next number (its
 * deliveries are charged under it). Undefined when the request is not finished, a replay of it
 * running included (a second replay at once waits for the row's lock, then finds it delivering),
 * or its content was erased.
 */
export async function beginReplay(
  tx: Queryable,
  projectId: string,
  requestId: string,
): Promise<ReplayBegun | undefined> {
  const [begun] = await tx<ReplayBegun[]>`
    with was as (
      select id, status from requests
      where id = ${requestId} and project_id = ${projectId}
      for update)
    update requests r set status = 'delivering', replays = r.replays + 1, updated_at = now()
    from was where r.id = was.id and was.status in ${tx(finishedStatuses)}
      and r.content_erased_at is null
    returning r.replays as replay, was.status as was`;
  if (!begun) return undefined;
  // Counted among the project's replays under way (store/limits.ts) while it is delivering; the
  // project's replays that ended are forgotten here, so the rows stay as few as those under way.
  await tx`
    delete from replays_begun b where b.project_id = ${projectId} and not exists (
      select 1 from requests r where r.id = b.request_id and r.status = 'delivering')`;
  await tx`
    insert into replays_begun (request_id, project_id) values (${requestId}, ${projectId})
    on conflict (request_id) do nothing`;
  return begun;
}

/** A replay whose start failed: its holds given back, its request as it was (unless moved since). */
export async function undoReplay(
  sql: Sql,
  requestId: string,
  begun: ReplayBegun & { workflowId: string },
  caps: PlanCaps,
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`delete from credit_holds where request_id = ${requestId} and replay = ${begun.replay}`;
    await releasePlaces(tx, begun.workflowId, caps);
    await tx`
      update requests set status = ${begun.was}, updated_at = now()
      where id = ${requestId} and status = 'delivering' and replays = ${begun.replay}`;
  });
}
