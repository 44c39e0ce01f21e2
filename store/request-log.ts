/**
 * The request log: a row per request and one per attempt at each of its targets. The worker
 * writes it (opens a request, starts and ends attempts, settles the request), the control plane
 * writes the streams edges report (`recordStream`) and resets a request it replays; the
 * management API reads it through ./request-views.ts. What "delivered" means in SQL is written
 * once here (`delivered`); store/retention.ts prunes the log.
 */
import type { CircuitOutcome } from "../core/circuit.ts";
import { answeredStatus, type DeliveryInput, type StreamRecord } from "../core/delivery.ts";
import type { DeliveryTarget, RequestStatus } from "../core/model.ts";
import { recordCircuitOutcome } from "./circuits.ts";
import { type Charge, chargeDelivery, releaseHolds } from "./credits.ts";
import type { Queryable, Sql } from "./db.ts";
import type { Begin } from "./group-commit.ts";
import { forgetWaiting, type PlanCaps } from "./waiting.ts";

/**
 * An attempt delivered: its target answered 2xx, as core's `classifyStatus` says. Never null: an
 * attempt with no answer (in flight, lost, refused, unreachable) did not deliver. Reads the
 * `attempts` row in scope.
 */
export const delivered = (q: Queryable) => q`coalesce(status_code between 200 and 299, false)`;

/** A request as the log opens it: the delivery input without what only its calls need. */
export type RequestOpening = Omit<DeliveryInput, "targets" | "headers" | "bodyBase64" | "body">;

/** The statuses a request is opened in: waiting for its time, delivering, or cancelled. */
type Opening = Extract<RequestStatus, "scheduled" | "delivering" | "cancelled">;

/**
 * Opens a request in the log. Idempotent: a retried or replayed open leaves the row as it is,
 * except that a scheduled request starts delivering when its time comes, and a cancel ends any.
 */
const insertRequest = (q: Queryable, input: RequestOpening, status: Opening = "delivering") => q`
  insert into requests (id, project_id, line_key, endpoint_path, key_mode, status,
    body_bytes, received_at, not_before, trace_id)
  select ${input.requestId}, p.id, ${input.line}, ${input.endpoint}, ${input.keyMode},
    ${status}, ${input.bodyBytes}, ${input.receivedAt}, ${input.notBefore ?? null},
    ${input.traceId ?? null}
  from projects p where p.slug = ${input.project}
  on conflict (id) do update set status = excluded.status, updated_at = now()
  where excluded.status = 'cancelled'
    or (requests.status = 'scheduled' and excluded.status = 'delivering')`;

/** Opens a request: delivering, or (a delayed one) scheduled until its time. */
export async function openRequest(
  sql: Sql,
  input: RequestOpening,
  status: Extract<Opening, "scheduled" | "delivering"> = "delivering",
): Promise<void> {
  await insertRequest(sql, input, status);
}

/**
 * A request cancelled before it was delivered: no further attempts will be made (its workflow
 * stopped them). Opens it, cancelled, when it was cancelled before its first task. Its credit
 * holds go back, and it waits no more, for its time or any target (store/waiting.ts). A target's
 * 2xx wins over the cancel: a request with a delivered attempt is settled from its attempts
 * instead (delivered, or partially failed beside targets that never got it). Answers the status.
 */
export async function cancelRequest(
  sql: Sql,
  input: RequestOpening,
  caps: PlanCaps,
): Promise<RequestStatus> {
  return sql.begin(async (tx) => {
    // Locks the row, so an attempt ending now settles it after this (endAttempt).
    await insertRequest(tx, input, "cancelled");
    await releaseHolds(tx, input.requestId);
    await forgetWaiting(tx, input.requestId, caps);
    const [answered] = await tx`
      select 1 from attempts where request_id = ${input.requestId} and ${delivered(tx)} limit 1`;
    return answered ? settleRequest(tx, input.requestId, []) : "cancelled";
  });
}

/**
 * Sets a request's status from all of its attempts, replays included: delivered when every
 * target it tried has a delivered attempt, failed when none has, partially failed in between.
 * The credits still held for `targetIds`, the deliveries settled (none charged), go back.
 */
export async function settleRequest(
  q: Queryable,
  requestId: string,
  targetIds: readonly string[],
): Promise<RequestStatus> {
  await releaseHolds(q, requestId, targetIds);
  return (await settle(q, requestId, q``)) ?? "failed";
}

/** `settleRequest`'s status update, narrowed by `only` (a condition on the request `r`, or none). */
async function settle(
  q: Queryable,
  requestId: string,
  only: ReturnType<Sql>,
): Promise<RequestStatus | undefined> {
  const [row] = await q<{ status: RequestStatus }[]>`
    update requests r set status = s.status, updated_at = now()
    from (
      select case
        when bool_and(delivered) then 'delivered'
        when bool_or(delivered) then 'partially_failed'
        else 'failed' end as status
      from (
        select target_id, bool_or(${delivered(q)}) as delivered
        from attempts where request_id = ${requestId} group by target_id
      ) per_target
    ) s
    where r.id = ${requestId} ${only}
    returning r.status`;
  return row?.status;
}

/**
 * Logs an attempt as it starts, so one lost with its worker still shows; an earlier attempt
 * at the same target that never ended is marked lost now. Attempts are numbered by the log,
 * so a lost one, a replay's or a reset's counts on from the ones before it. A request's first
 * attempt opens the request in the same statement (one commit, not two).
 */
export async function startAttempt(
  sql: Sql,
  a: {
    opening?: RequestOpening | undefined;
    requestId: string;
    target: Pick<DeliveryTarget, "id" | "name">;
    startedAt: Date;
  },
): Promise<{ id: string; attempt: number }> {
  const opened = a.opening ? sql`opened as (${insertRequest(sql, a.opening)}),` : sql``;
  const [row] = await sql<{ id: string; attempt: number }[]>`
    with ${opened} lost as (
      update attempts
      set error = 'lost: no outcome (the worker stopped or the attempt timed out)'
      where request_id = ${a.requestId} and target_id = ${a.target.id} and latency_ms is null
    )
    insert into attempts (request_id, target_id, target_name, attempt, started_at)
    select ${a.requestId}, ${a.target.id}, ${a.target.name}, coalesce(max(attempt), 0) + 1,
      ${a.startedAt}
    from attempts where request_id = ${a.requestId} and target_id = ${a.target.id}
    returning id, attempt`;
  return { id: row?.id ?? "", attempt: row?.attempt ?? 1 };
}

/** How an attempt's end sets its request's status: to this, or "settled" from its attempts. */
export type Finishing = RequestStatus | "settled";

export interface AttemptEnd {
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /**
   * Charged when the target answered (once per delivery: a retry finds its charge there), in
   * place of the delivery's credit hold; the hold goes back when the delivery ends unanswered.
   */
  charge: Charge;
  /** No attempt follows this one (a sync call's): its delivery ends with it. */
  lastTry: boolean;
  /** How the attempt moves its target's circuit (async deliveries only). */
  circuit: CircuitOutcome;
  endedAt: Date;
}

/** What an attempt's end changed beyond itself. */
export interface AttemptEnded {
  /** The request's status, when this attempt set it. */
  status: RequestStatus | undefined;
  /** The target's circuit, when this attempt opened or closed it. */
  circuit: "opened" | "recovered" | null;
}

/**
 * An attempt's outcome, charged when the target answered, its target's circuit moved, and the
 * request's final status when the caller knows it (`finishing`; "settled": from its attempts,
 * this one included): one transaction, one commit.
 */
export async function endAttempt(
  sql: Sql,
  attemptId: string,
  end: AttemptEnd,
  finishing?: Finishing,
  /** Its transaction: its own, or one it shares with others (./group-commit.ts). */
  begin: Begin = (work) => sql.begin(work) as Promise<never>,
): Promise<AttemptEnded> {
  const record = (q: Queryable) => q`
    update attempts set status_code = ${end.statusCode}, latency_ms = ${end.latencyMs},
      error = ${end.error}
    where id = ${attemptId}`;
  if (end.statusCode === null && !finishing && !end.lastTry && end.circuit === "neutral") {
    await record(sql);
    return { status: undefined, circuit: null };
  }
  const { requestId, targetId } = end.charge;
  return begin(async (tx) => {
    await record(tx);
    // The circuit before the charge: a charge that empties its pool records a change, which
    // must be the transaction's last lock taken (store/changes.ts).
    const circuit = await recordCircuitOutcome(tx, targetId, end.circuit, end.endedAt);
    if (end.statusCode !== null) await chargeDelivery(tx, end.charge);
    else if (end.lastTry) await releaseHolds(tx, requestId, [targetId]);
    if (finishing === "settled") {
      return { status: await settleRequest(tx, requestId, [targetId]), circuit };
    }
    // A 2xx landing after its request was cancelled (a stray attempt) still wins.
    if (!finishing && answeredStatus(end.statusCode) === "delivered") {
      await settle(tx, requestId, tx`and r.status = 'cancelled'`);
    }
    if (finishing) {
      await tx`
        update requests set status = ${finishing}, updated_at = now()
        where id = ${requestId}`;
    }
    return { status: finishing, circuit };
  });
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
 */
export async function recordStream(sql: Sql, record: LoggedStream): Promise<void> {
  const { target, ownsStatus, statusCode, latencyMs, bytes, error, ...request } = record;
  await sql.begin(async (tx) => {
    await insertRequest(tx, request);
    const [opened] = await tx`select 1 from requests where id = ${request.requestId} for update`;
    if (!opened) return; // its project is gone
    const [logged] = await tx`
      select 1 from attempts where request_id = ${request.requestId} and target_id = ${target.id}`;
    if (logged) return;
    await tx`
      insert into attempts (request_id, target_id, target_name, attempt, started_at, status_code,
        latency_ms, error)
      values (${request.requestId}, ${target.id}, ${target.name}, 1, ${request.receivedAt},
        ${statusCode}, ${latencyMs}, ${error})`;
    if (statusCode !== null) {
      await chargeDelivery(tx, {
        project: request.project,
        pool: request.keyMode,
        requestId: request.requestId,
        targetId: target.id,
        bytes,
      });
    } else {
      await releaseHolds(tx, request.requestId, [target.id]);
    }
    if (ownsStatus) {
      await tx`
        update requests set status = ${answeredStatus(statusCode)}, updated_at = now()
        where id = ${request.requestId}`;
    }
  });
}

/** A replayed request is delivering again until its new attempts settle it. */
export async function markDelivering(sql: Sql, requestId: string): Promise<void> {
  await sql`update requests set status = 'delivering', updated_at = now() where id = ${requestId}`;
}
