/**
 * Attempts as the log keeps them: started before the call (so one lost with its worker shows),
 * ended with its outcome, its charge, its target's circuit and, when it ends its request, the
 * request's status. Written as sets: the attempts a worker starts or ends together (a batch's,
 * a busy worker's) are one statement per kind of write, not one per attempt, since on this kind
 * of machine a round trip costs more than the work it carries (docs/benchmarks.md).
 */
import { type CircuitOutcome, circuitOutcomes } from "../core/circuit.ts";
import { answeredStatus } from "../core/delivery.ts";
import type { DeliveryTarget, RequestStatus } from "../core/model.ts";
import { lockCircuits, moveCircuitsBy, recordSuccesses, targetsMoved } from "./circuits.ts";
import {
  balancesAfter,
  type Charge,
  ledgerCharges,
  noteEmptiedPools,
  releaseDeliveryHolds,
} from "./credits.ts";
import type { Queryable, Transaction } from "./db.ts";
import { freeFlowSlots } from "./flow.ts";
import {
  insertRequests,
  type Received,
  type RequestOpening,
  settleStatuses,
} from "./request-log.ts";
import { deliveryTarget } from "./routing.ts";
import { WORKER_ALIVE_MS } from "./workers.ts";

export interface AttemptStart {
  /** A request's first attempt opens the request in the same statement (one commit, not two). */
  opening?: (RequestOpening & { received: Received }) | undefined;
  requestId: string;
  target: Pick<DeliveryTarget, "id" | "name">;
  startedAt: Date;
  /** The replay it is part of (core/delivery.ts); absent, the call's own deliveries. */
  replay?: number | undefined;
}

/** What the log shows of one delivery's attempts so far (`earlierAttempts`). */
export interface EarlierAttempts {
  /** A 2xx's status, when one was logged. */
  delivered: number | null;
  /** Its latest attempt with no outcome yet: when it began, on which worker, and whether that worker lives. */
  unended: { startedAtMs: number; workerId: string | null; workerAlive: boolean } | null;
}

export interface StartedAttempt {
  id: string;
  attempt: number;
  /**
   * Its target as stored now (a retry goes where the owner sends now): null when deleted, absent
   * when the log did not answer it.
   */
  target?: DeliveryTarget | null;
  /**
   * The status of an earlier attempt that delivered it (a 2xx): no attempt is started, and the
   * target is not called again, whoever runs it again (a workflow task retried, say).
   */
  delivered?: number;
}

/**
 * Logs attempts as they start, but for deliveries an earlier 2xx of the same run ended; an earlier
 * attempt at the same target that never ended is marked lost now. Attempts are numbered by the
 * log, so a lost one, a replay's or a reset's counts on from the ones before it. Answers each
 * start's row, in order, with its target as stored now.
 */
export async function startAttempts(
  q: Queryable,
  starts: readonly AttemptStart[],
  /** The worker process making them (store/workers.ts). */
  workerId: string | null = null,
): Promise<StartedAttempt[]> {
  // A request of two targets opens once: a statement may not touch one row twice.
  const openings = [
    ...new Map(starts.flatMap((s) => (s.opening ? [[s.requestId, s.opening]] : []))).values(),
  ];
  const opened = openings.length > 0 ? q`opened as (${insertRequests(q, openings)}),` : q``;
  const rows = await q<
    {
      id: string | null;
      requestId: string;
      targetId: string;
      attempt: number;
      delivered: number | null;
      target: DeliveryTarget | null;
    }[]
  >`
    with ${opened} started as (
      select * from unnest(${starts.map((s) => s.requestId)}::text[],
        ${starts.map((s) => s.target.id)}::text[], ${starts.map((s) => s.target.name)}::text[],
        ${starts.map((s) => s.startedAt.toISOString())}::timestamptz[],
        ${starts.map((s) => s.replay ?? 0)}::integer[])
        as s (request_id, target_id, target_name, started_at, replay)
    ), delivered as (
      select distinct on (a.request_id, a.target_id) a.request_id, a.target_id, a.attempt,
        a.status_code
      from attempts a join started s using (request_id, target_id, replay)
      where a.status_code between 200 and 299
      order by a.request_id, a.target_id, a.id
    ), starting as (
      select * from started s where not exists (
        select 1 from delivered d where (d.request_id, d.target_id) = (s.request_id, s.target_id))
    ), lost as (
      update attempts a
      set error = 'lost: no outcome (the worker stopped or the attempt timed out)'
      from starting s
      where a.request_id = s.request_id and a.target_id = s.target_id and a.latency_ms is null
    )
    , inserted as (
      insert into attempts (request_id, target_id, target_name, attempt, started_at, worker_id,
        replay)
      select s.request_id, s.target_id, s.target_name,
        coalesce((select max(a.attempt) from attempts a
          where a.request_id = s.request_id and a.target_id = s.target_id), 0) + 1,
        s.started_at, ${workerId}, s.replay
      from starting s
      returning id, request_id, target_id, attempt
    )
    select i.*, null::integer as delivered,
      (select ${deliveryTarget(q)} from targets t where t.id = i.target_id) as target
    from inserted i
    union all
    select null, d.request_id, d.target_id, d.attempt, d.status_code, null from delivered d`;
  const byDelivery = new Map(rows.map((row) => [`${row.requestId}/${row.targetId}`, row]));
  return starts.map((s) => {
    const row = byDelivery.get(`${s.requestId}/${s.target.id}`);
    if (row?.delivered != null) return { id: "", attempt: row.attempt, delivered: row.delivered };
    return { id: row?.id ?? "", attempt: row?.attempt ?? 1, ...(row && { target: row.target }) };
  });
}

/** How an attempt's end sets its request's status: to this, or "settled" from its attempts. */
export type Finishing = RequestStatus | "settled";

/** What the log keeps of a target's answer (core/delivery.ts LOGGED_ANSWER_BYTES). */
export interface LoggedAnswer {
  headers: Record<string, string>;
  /** The body's first bytes, in base64. */
  bodyBase64: string;
  /** The body was longer than what is kept (or could not be read whole). */
  truncated: boolean;
}

export interface AttemptEnd {
  attemptId: string;
  statusCode: number | null;
  /** Null when the target did not answer. */
  answer: LoggedAnswer | null;
  latencyMs: number;
  error: string | null;
  /** Its transformation dropped the call: the target was not called, and is skipped. */
  skipped?: boolean;
  /**
   * Charged when the target answered (once per delivery: a retry finds its charge there), in
   * place of the delivery's credit hold; the hold goes back when the delivery ends unanswered.
   */
  charge: Charge;
  /** No attempt follows this one (a sync call's): its delivery ends with it. */
  lastTry: boolean;
  /** How the attempt moves its target's circuit (async deliveries only). */
  circuit: CircuitOutcome;
  /** It held a place among its limited target's attempts in flight (./flow.ts). */
  freesFlowSlot?: boolean;
  endedAt: Date;
  /** The request's final status, when the caller knows it ("settled": from its attempts). */
  finishing?: Finishing | undefined;
}

/** What an attempt's end changed beyond itself. */
export interface AttemptEnded {
  /** The request's status, when this attempt set it. */
  status: RequestStatus | undefined;
  /** The target's circuit, when this attempt opened or closed it. */
  circuit: "opened" | "recovered" | null;
}

/**
 * Attempts' outcomes, in the caller's transaction: recorded, charged when the target answered,
 * their targets' circuits moved, and their requests' statuses set when the caller knows them.
 * Targets' circuits and then credit pools are locked in sorted order, so two workers ending
 * attempts of the same projects at once do not wait on each other in a circle there.
 */
export async function endAttempts(
  tx: Transaction,
  ends: readonly AttemptEnd[],
): Promise<AttemptEnded[]> {
  const charges = ends.filter((e) => e.statusCode !== null).map((e) => e.charge);
  const settled = ends.filter((e) => e.finishing === "settled");
  // A 2xx landing after its request was cancelled (a stray attempt) still wins.
  const stray = ends.filter((e) => !e.finishing && answeredStatus(e.statusCode) === "delivered");
  const told = ends.filter((e) => e.finishing && e.finishing !== "settled");
  // A failure moves its circuit in statements that read and may insert its row: those go first
  // and alone, so the circuits' locks still come before the pools'.
  const moves = circuitOutcomes(
    ends.map((e) => ({ targetId: e.charge.targetId, outcome: e.circuit })),
  );
  const moved = moves.moving.length > 0 ? await moveCircuits(tx, ends, moves) : null;
  // No statement below takes what another answers, so they go as one pipeline: a round trip,
  // not one each. Each is an async call that reaches its statement at once, so they are sent in
  // this order and Postgres runs them in it: the attempts before the statuses read from them,
  // the circuits before the charges, since a charge that empties its pool records a change,
  // which must be the transaction's last lock taken (store/changes.ts).
  const [, circuits, , charged, balances, , statuses] = await Promise.all([
    recordEnds(tx, ends),
    moved ?? moveCircuits(tx, ends, moves),
    freeFlowSlots(
      tx,
      ends.filter((e) => e.freesFlowSlot).map((e) => e.charge),
    ),
    ledgerCharges(tx, charges),
    balancesAfter(tx, charges),
    releaseDeliveryHolds(
      tx,
      ends
        .filter((e) => e.finishing === "settled" || (e.statusCode === null && e.lastTry))
        .map((e) => e.charge),
    ),
    settleStatuses(
      tx,
      settled.map((e) => e.charge.requestId),
    ),
    settleStatuses(
      tx,
      stray.map((e) => e.charge.requestId),
      tx`and r.status = 'cancelled'`,
    ),
    setStatuses(tx, told),
  ]);
  // A circuit opened or closed moves what its target holds: the edges learn it, last.
  await targetsMoved(
    tx,
    ends.flatMap((e, i) => (circuits[i] ? [e.charge.targetId] : [])),
  );
  await noteEmptiedPools(tx, charged, balances);
  return ends.map((e, i) => ({
    status:
      e.finishing === "settled"
        ? (statuses.get(e.charge.requestId) ?? "failed")
        : (e.finishing as RequestStatus | undefined),
    circuit: circuits[i] ?? null,
  }));
}

/** The attempts' outcomes, each in its row. */
async function recordEnds(tx: Transaction, ends: readonly AttemptEnd[]): Promise<void> {
  await tx`
    update attempts a set status_code = e.status_code, latency_ms = e.latency_ms, error = e.error,
      response_headers = e.headers::jsonb, response_body = decode(e.body, 'base64'),
      response_truncated = coalesce(e.truncated::boolean, false), skipped = e.skipped::boolean
    from unnest(${ends.map((e) => e.attemptId)}::bigint[],
      ${ends.map((e) => e.statusCode)}::int[], ${ends.map((e) => e.latencyMs)}::int[],
      ${ends.map((e) => e.error)}::text[],
      ${ends.map((e) => (e.answer ? JSON.stringify(e.answer.headers) : null))}::text[],
      ${ends.map((e) => e.answer?.bodyBase64 ?? null)}::text[],
      ${ends.map((e) => (e.answer ? String(e.answer.truncated) : null))}::text[],
      ${ends.map((e) => String(e.skipped === true))}::text[])
      as e (id, status_code, latency_ms, error, headers, body, truncated, skipped)
    where a.id = e.id`;
  const dropped = ends.filter((e) => e.skipped).map((e) => e.attemptId);
  if (dropped.length > 0) await logSkipped(tx, dropped);
}

/**
 * The request log names the targets these attempts skipped (their transformations dropped the
 * call) among its `skipped`, once each, as the edge names those its filters skipped.
 */
export async function logSkipped(q: Queryable, attemptIds: readonly string[]): Promise<void> {
  await q`
    update requests r set skipped = coalesce(r.skipped, '[]'::jsonb) || d.added
    from (
      select a.request_id, jsonb_agg(jsonb_build_object('targetId', a.target_id,
        'targetName', a.target_name, 'reason', 'transform')) as added
      from attempts a join requests q on q.id = a.request_id
      where a.id = any(${attemptIds}::bigint[])
        and not coalesce(q.skipped, '[]'::jsonb)
          @> jsonb_build_array(jsonb_build_object('targetId', a.target_id))
      group by a.request_id
    ) d
    where r.id = d.request_id`;
}

/** The statuses of requests the ends' callers know (`finishing`, not "settled"). */
async function setStatuses(tx: Transaction, told: readonly AttemptEnd[]): Promise<void> {
  if (told.length === 0) return;
  await tx`
    update requests r set status = t.status, updated_at = now()
    from unnest(${told.map((e) => e.charge.requestId)}::text[],
      ${told.map((e) => e.finishing as string)}::text[]) as t (id, status)
    where r.id = t.id`;
}

/**
 * Each end's move of its target's circuit: the targets with only successes in the set are closed
 * in one statement; a target with a failure moves by its ends in order, read and written once
 * (its rows are locked first, all in target order).
 */
async function moveCircuits(
  tx: Transaction,
  ends: readonly AttemptEnd[],
  { succeededOnly, moving, targets }: ReturnType<typeof circuitOutcomes>,
): Promise<("opened" | "recovered" | null)[]> {
  if (moving.length > 0) await lockCircuits(tx, targets);
  const recovered = await recordSuccesses(tx, succeededOnly);
  const moved: ("opened" | "recovered" | null)[] = ends.map(() => null);
  if (moving.length > 0) {
    const outcomes = moving.map((i) => {
      const end = ends[i] as AttemptEnd;
      return { targetId: end.charge.targetId, outcome: end.circuit, at: end.endedAt };
    });
    const failing = [...new Set(outcomes.map((o) => o.targetId))];
    const moves = await moveCircuitsBy(tx, failing, outcomes);
    for (const [k, i] of moving.entries()) moved[i] = moves[k] ?? null;
  }
  // A recovery is told once, by the first of its target's ends.
  for (const targetId of recovered) {
    const i = ends.findIndex((e) => e.charge.targetId === targetId);
    if (i >= 0) moved[i] = "recovered";
  }
  return moved;
}

/**
 * What the log shows of these requests' attempts so far, by "request id, target id, replay" (a
 * replay's number, 0 for the call's own): a first attempt run again (its workflow task lost with
 * its worker, or timed out) delivers none twice (workflows/deliveries.ts `rerunVerdict`).
 */
export async function earlierAttempts(
  q: Queryable,
  requestIds: string[],
): Promise<Map<string, EarlierAttempts>> {
  const rows = await q<
    {
      requestId: string;
      targetId: string;
      replay: number;
      delivered: number | null;
      startedAt: Date | null;
      workerId: string | null;
      workerAlive: boolean | null;
    }[]
  >`
    with tried as (
      select id, request_id, target_id, replay, status_code, latency_ms, error, started_at,
        worker_id
      from attempts where request_id = any(${requestIds}::text[])
    )
    select a.request_id, a.target_id, a.replay,
      max(a.status_code) filter (where a.status_code between 200 and 299) as delivered,
      u.started_at, u.worker_id, u.worker_alive
    from tried a left join lateral (
      select l.started_at, l.worker_id, exists (
        select 1 from workers w where w.id = l.worker_id
          and w.seen_at > now() - make_interval(secs => ${WORKER_ALIVE_MS / 1000})
      ) as worker_alive
      from tried l
      where l.request_id = a.request_id and l.target_id = a.target_id and l.replay = a.replay
        and l.latency_ms is null and l.error is null
      order by l.id desc limit 1
    ) u on true
    group by a.request_id, a.target_id, a.replay, u.started_at, u.worker_id, u.worker_alive`;
  return new Map(
    rows.map((r) => [
      `${r.requestId} ${r.targetId} ${r.replay}`,
      {
        delivered: r.delivered,
        unended: r.startedAt
          ? {
              startedAtMs: r.startedAt.getTime(),
              workerId: r.workerId,
              workerAlive: r.workerAlive === true,
            }
          : null,
      },
    ]),
  );
}
