/**
 * An attempt at a target, as each activity that makes one does: the target's hold and the
 * project's share of the worker checked first, then the call, logged (and charged) as an attempt
 * whatever comes of it, and its verdict.
 */
import { ApplicationFailure, Context } from "@temporalio/activity";
import { fromBase64, toBase64 } from "../core/base64.ts";
import { type CircuitOutcome, circuitOutcome } from "../core/circuit.ts";
import {
  ATTEMPT_HEARTBEAT_MS,
  type SyncInput,
  type SyncOutcome,
  syncStatus,
} from "../core/delivery.ts";
import { flowLimitsOf, THROTTLED } from "../core/flow.ts";
import { loggedHeaders } from "../core/headers.ts";
import type { RequestStatus } from "../core/model.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import type { SigningKey } from "../core/signing.ts";
import type { TargetFailure } from "../core/target-call.ts";
import { activeTrace, type TraceContext } from "../core/tracing.ts";
import { hmacSha256 } from "../platform/node-crypto.ts";
import type { AttemptEnded, Finishing, LoggedAnswer } from "../store/attempt-log.ts";
import { loadBody } from "../store/bodies.ts";
import { reserveCredits, reserveCreditsBatch } from "../store/credits.ts";
import type { Sql } from "../store/db.ts";
import { freeFlowSlots } from "../store/flow.ts";
import * as requestLog from "../store/request-log.ts";
import type { AttemptDeps } from "./activity-deps.ts";
import type { TakeSlot } from "./batch-attempts.ts";
import type { Busy, DeliverInput, FirstAttempt, RequestRow } from "./deliveries.ts";
import type { ClaimedCall } from "./sync-answers.ts";
import {
  callAndRead,
  deliveredBefore,
  loggedAnswer,
  type Sent,
  syncOutcome,
  verdictOn,
} from "./target-answers.ts";
import { roomForAttempt } from "./target-room.ts";

/** A busy answer: how long to wait, drawn from the project's share of the pool. */
function busy(slots: ProjectSlots, project: string): Busy {
  return { kind: "busy", waitMs: slots.waitMs(project, Math.random()) };
}

/**
 * A request's first attempt at a target, run as a local activity in the workflow's first task:
 * opens the request in the log, then tries once. Answers its verdict, never throws for the
 * target's sake, so a request whose targets all answer costs Temporal no other task. A target
 * whose deliveries wait (open circuit, paused) is not tried: the request is opened and the
 * verdict says so; nor is one its project's share of the worker has no room for ("busy": the
 * workflow waits on a timer, holding no slot, and tries again).
 */
export async function firstAttempt(
  deps: AttemptDeps,
  request: RequestRow,
  delivery: DeliverInput,
  only: boolean,
  takeSlot: TakeSlot = async () => deps.slots.attempts.take(delivery.project),
): Promise<FirstAttempt> {
  // One not tried is in the log all the same while it waits (in its batch, say).
  const untried = async <V>(verdict: V) => {
    await requestLog.openRequest(deps.sql, { ...request, received: receivedOf(delivery, request) });
    return verdict;
  };
  const hold = await deps.holdOf(delivery.target.id);
  if (hold) return untried({ kind: "held", hold });
  const release = await roomForAttempt(deps, delivery, takeSlot);
  if (release === "busy") return untried(busy(deps.slots.attempts, delivery.project));
  if (release === "no room") return untried({ kind: "held", hold: THROTTLED });
  const sent = await postToTarget(deps, {
    ...delivery,
    opening: request,
    finishing: (sent) =>
      only && verdictOn(sent, deps.retryPolicy).kind !== "retry" ? "settled" : undefined,
  }).finally(release);
  return { ...verdictOn(sent, deps.retryPolicy), ...(sent.status && { settled: sent.status }) };
}

/**
 * A later attempt, an activity Temporal retries (or not) by the verdict it throws; "held" when
 * the target's deliveries wait (an open circuit, a pause), busy (and how long to wait) when its
 * project's share of the worker is full: then it is not tried.
 */
export async function deliver(
  deps: AttemptDeps,
  input: DeliverInput,
): Promise<number | "held" | "skipped" | Busy> {
  const hold = await deps.holdOf(input.target.id);
  if (hold && !(input.probe && hold === "circuit_open")) return "held";
  const release = await roomForAttempt(deps, input, async () =>
    deps.slots.attempts.take(input.project),
  );
  if (release === "no room") return "held";
  if (release === "busy") {
    const wait = busy(deps.slots.attempts, input.project);
    if (input.waitsWhenBusy) return wait;
    // A workflow of an older release, mid-upgrade, knows no busy answer: Temporal's retry waits.
    throw ApplicationFailure.create({
      message: "this project has its share of the worker in flight",
      type: "ProjectBusy",
      nextRetryDelay: wait.waitMs,
    });
  }
  const context = Context.current();
  const beating = setInterval(() => context.heartbeat(), ATTEMPT_HEARTBEAT_MS);
  const verdict = verdictOn(
    await postToTarget(deps, input).finally(() => {
      clearInterval(beating);
      release();
    }),
    deps.retryPolicy,
  );
  if (verdict.kind === "delivered") return verdict.status;
  if (verdict.kind === "skipped") return "skipped";
  throw ApplicationFailure.create({
    message: verdict.message,
    type: verdict.type,
    ...(verdict.kind === "failed" ? { nonRetryable: true } : { nextRetryDelay: verdict.delayMs }),
  });
}

/**
 * A sync call, whole: reserve its credits when its edge did not, open the request, call the
 * target once, log it, close the request. One local activity, so the caller waits for one
 * workflow task and no more; two commits beside the reservation's, one of them beside the call.
 */
export async function relaySyncCall(
  deps: AttemptDeps,
  input: SyncInput,
  /** Its attempt's parent span: the activity's when absent. */
  trace?: TraceContext,
): Promise<SyncOutcome> {
  const { target, headers, bodyBase64, ownsStatus, holds = [], ...request } = input;
  const signing = signingOf(deps, target.id); // beside the reservation: one round trip, not two
  if (holds.length > 0) {
    const { project, keyMode: pool, requestId } = request;
    if (!(await reserveCredits(deps.sql, { project, pool, requestId, holds }))) {
      return { kind: "refused" };
    }
  }
  const sent = await postToTarget(deps, {
    signing: await signing,
    requestId: request.requestId,
    project: request.project,
    keyMode: request.keyMode,
    target,
    headers,
    bodyBase64,
    bodyRef: request.bodyRef,
    opening: request,
    sync: true,
    finishing: (sent) => (ownsStatus ? syncStatus(syncOutcome(sent)) : undefined),
    ...(trace && { trace }),
  });
  return syncOutcome(sent);
}

/**
 * A batch's sync calls (./sync-calls.ts), one outcome each, in order: the credits of those that
 * hold any reserved together (a transaction per pool, the pool row locked once, not once a
 * call), then each called as `relaySyncCall` calls one alone, in its own trace.
 */
export function relaySyncCalls(deps: AttemptDeps, claimed: ClaimedCall[]): Promise<SyncOutcome>[] {
  const fits = reservedTogether(
    deps.sql,
    claimed.map(({ call }) => call),
  );
  return claimed.map(async ({ call, trace }, i): Promise<SyncOutcome> => {
    if (!(await fits)[i]) return { kind: "refused" };
    return relaySyncCall(deps, { ...call, holds: [] }, trace);
  });
}

async function reservedTogether(sql: Sql, calls: SyncInput[]): Promise<boolean[]> {
  const fits = calls.map(() => true);
  const byPool = new Map<string, { call: SyncInput; i: number }[]>();
  for (const [i, call] of calls.entries()) {
    if ((call.holds ?? []).length === 0) continue;
    const pool = `${call.project} ${call.keyMode}`;
    byPool.set(pool, [...(byPool.get(pool) ?? []), { call, i }]);
  }
  await Promise.all(
    [...byPool.values()].map(async (pool) => {
      const [first] = pool;
      if (!first) return;
      const poolFits = await reserveCreditsBatch(sql, {
        project: first.call.project,
        pool: first.call.keyMode,
        calls: pool.map(({ call }) => ({ requestId: call.requestId, holds: call.holds ?? [] })),
      });
      for (const [j, { i }] of pool.entries()) fits[i] = poolFits[j] ?? false;
    }),
  );
  return fits;
}

/** An attempt to make, as `postToTarget` takes it. */
interface Attempt extends DeliverInput {
  /** A request's first attempt opens the request in the log (startAttempt). */
  opening?: RequestRow;
  /**
   * A sync call: read the answer; tried once, so it is attempt 1, logged beside the call rather
   * than before it (a worker lost mid-call leaves it in the log with no outcome).
   */
  sync?: boolean;
  /** The request's status after this attempt, when it ends the request. */
  finishing?: (sent: Sent) => Finishing | undefined;
  /** Its time and keys when read already (`signingOf`). */
  signing?: Signing;
  /** The parent of its span: the activity's when absent (a batched sync call's own). */
  trace?: TraceContext;
}

type Signing = { signedAt: Date; keys: Promise<SigningKey[]> };

/**
 * When an attempt is signed and the keys that sign it then, being read (so that the caller's
 * next statement goes beside them): on the stack's clock (the dev clock's, under tests), as the
 * edge signs streams and stamps requests, so the usage chart counts the attempt in that hour.
 */
async function signingOf(deps: AttemptDeps, targetId: string): Promise<Signing> {
  const signedAt = await deps.now();
  const keys = deps.signingKeysOf(targetId, signedAt);
  keys.catch(() => {}); // awaited by the attempt; a failure is not unhandled meanwhile
  return { signedAt, keys };
}

/**
 * One POST to a target, logged (and charged, by the body's bytes) as an attempt whatever comes
 * of it. A target whose name now resolves to a refused address is logged as refused and never
 * reached; a redirect is its answer, not followed.
 */
async function postToTarget(
  deps: AttemptDeps,
  call: Attempt,
): Promise<Sent & { status: RequestStatus | undefined }> {
  const { requestId, target } = call;
  const body = await bodyOf(deps.sql, call);
  const { signedAt, keys } = call.signing ?? (await signingOf(deps, target.id));
  const starting = deps.startAttempt({
    opening: call.opening && { ...call.opening, received: receivedOf(call, call.opening) },
    requestId,
    target,
    startedAt: signedAt,
    replay: call.replay,
  });
  starting.catch(() => {}); // awaited below; a failure is not unhandled meanwhile
  // An async attempt is in the log before the call, so one lost with its worker shows; the log
  // answers its target as it is now, so a retry goes where the owner sends now.
  const logged = call.sync ? undefined : await starting;
  // Delivered by an earlier run of this attempt (its task retried, say): not sent again, and the
  // place it took among its limited target's attempts in flight is freed now, not at its expiry.
  if (logged?.delivered) {
    if (flowLimitsOf(target)?.maxConcurrent != null) {
      await freeFlowSlots(deps.sql, [{ requestId, targetId: target.id }]);
    }
    return { ...deliveredBefore(logged.attempt, logged.delivered), status: undefined };
  }
  const attempt = logged?.attempt ?? 1;
  const current = logged?.target === undefined ? target : logged.target;
  const signingKeys = await keys;
  const started = performance.now();
  const called = !current
    ? { answer: null, failure: TARGET_DELETED }
    : await callAndRead(
        deps.callTarget,
        {
          requestId,
          target: current,
          attempt,
          callerHeaders: call.headers,
          body,
          signingKeys,
          signedAt,
          hmac: hmacSha256,
          signal: deps.abortSignal(),
          timeoutBounds: "answer",
          project: call.project,
          transform: deps.transform,
          // The activity's span, when the worker traces (Temporal's interceptor started it).
          trace: call.trace ?? activeTrace(),
        },
        call.sync === true,
      );
  const sent: Sent = { attempt, ...called, ...(current?.retry && { retry: current.retry }) };
  const ended = await endAttempt(deps, (await starting).id, {
    requestId,
    replay: call.replay,
    project: call.project,
    keyMode: call.keyMode,
    target,
    attempt,
    statusCode: sent.answer?.status ?? null,
    answer: sent.answer && loggedAnswer(sent.answer),
    latencyMs: Math.round(performance.now() - started),
    error: sent.dropped ? DROPPED_MESSAGE : (sent.failure?.message ?? null),
    ...(sent.dropped && { skipped: true }),
    billedBytes: body.byteLength,
    // A sync call answers its caller: its target's failures are the caller's to see.
    circuit: call.sync ? "neutral" : circuitOutcome(verdictOn(sent, deps.retryPolicy)),
    freesFlowSlot: !call.sync && flowLimitsOf(target)?.maxConcurrent != null,
    lastTry: call.sync === true,
    finishing: call.finishing?.(sent),
  });
  if (ended.circuit) {
    deps.observeCircuit(target.id, ended.circuit);
    if (ended.circuit === "opened") await deps.ensureCircuit(target.id);
  }
  return { ...sent, status: ended.status };
}

/** The request as the log keeps it: its headers less those marked secret, its body when inline. */
function receivedOf(call: DeliverInput, request: RequestRow): requestLog.Received {
  const headers = loggedHeaders(call.headers, request.secretHeaders);
  const inline =
    call.body !== undefined ? toBase64(new TextEncoder().encode(call.body)) : call.bodyBase64;
  const bodyRef = call.bodyRef ?? null;
  return { headers, bodyBase64: bodyRef ? null : inline, bodyRef };
}

/** A request's body: from Postgres when it waits there, else from the input itself. */
async function bodyOf(sql: Sql, input: DeliverInput): Promise<Uint8Array<ArrayBuffer>> {
  if (input.bodyRef) return loadBody(sql, input.bodyRef);
  return input.body !== undefined
    ? new TextEncoder().encode(input.body)
    : fromBase64(input.bodyBase64);
}

/** An attempt whose target was deleted: never made, and never retried. */
const TARGET_DELETED: TargetFailure = {
  kind: "refused",
  message: "cancelled: the target was deleted",
};

/** What the log says of an attempt its target's transformation dropped. */
const DROPPED_MESSAGE = "skipped: its transformation dropped the call";

/** Ends an attempt: told to the log and the metrics, then recorded (and charged) in the log. */
function endAttempt(
  deps: Pick<AttemptDeps, "observeAttempt" | "endAttempt">,
  attemptId: string,
  a: Pick<DeliverInput, "requestId" | "replay" | "project" | "keyMode" | "target"> & {
    attempt: number;
    statusCode: number | null;
    answer: LoggedAnswer | null;
    latencyMs: number;
    error: string | null;
    skipped?: boolean;
    billedBytes: number;
    circuit: CircuitOutcome;
    freesFlowSlot: boolean;
    lastTry: boolean;
    finishing: Finishing | undefined;
  },
): Promise<AttemptEnded> {
  deps.observeAttempt({
    requestId: a.requestId,
    target: a.target.name,
    mode: a.target.deliveryMode,
    attempt: a.attempt,
    statusCode: a.statusCode,
    latencyMs: a.latencyMs,
    error: a.error,
  });
  const charge = {
    project: a.project,
    pool: a.keyMode,
    requestId: a.requestId,
    targetId: a.target.id,
    bytes: a.billedBytes,
    replay: a.replay,
  };
  const { statusCode, answer, latencyMs, error, circuit, freesFlowSlot, lastTry, finishing } = a;
  return deps.endAttempt({
    attemptId,
    ...(a.skipped && { skipped: true }),
    statusCode,
    answer,
    freesFlowSlot,
    latencyMs,
    error,
    charge,
    circuit,
    lastTry,
    finishing,
    endedAt: new Date(),
  });
}
