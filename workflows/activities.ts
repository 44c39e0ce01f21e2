/**
 * Relay's activities: the I/O of its workflows. Every call to a target is logged as an attempt
 * before its outcome is reported to Temporal, so the request log shows every try.
 */
import { ApplicationFailure, Context } from "@temporalio/activity";
import { type CircuitOutcome, circuitOutcome, type Hold } from "../core/circuit.ts";
import {
  ATTEMPT_HEARTBEAT_MS,
  type AttemptVerdict,
  attemptVerdict,
  type Backoff,
  type DeliveryInput,
  decodeBody,
  MAX_SYNC_ANSWER_BYTES,
  type StreamRecord,
  type SyncInput,
  type SyncOutcome,
  syncStatus,
} from "../core/delivery.ts";
import type { DeliveryTarget, KeyMode, RequestStatus } from "../core/model.ts";
import type { NotificationEvent } from "../core/notifications.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import { TOO_LARGE } from "../core/read-capped.ts";
import { open } from "../core/sealing.ts";
import { decodeSigningSecret, importSigningKey, type SigningKey } from "../core/signing.ts";
import {
  discardAnswer,
  readAnswer,
  sendToTarget,
  type TargetCallInput,
  type TargetFailure,
} from "../core/target-call.ts";
import type { CallTarget } from "../core/target-request.ts";
import { activeTrace } from "../core/tracing.ts";
import { loadBody } from "../store/bodies.ts";
import * as circuits from "../store/circuits.ts";
import type { Sql } from "../store/db.ts";
import { type Begin, groupCommit } from "../store/group-commit.ts";
import * as requestLog from "../store/request-log.ts";
import { type Pruned, pruneRequestLog } from "../store/retention.ts";
import { rotateExpiringKeys } from "../store/rotation.ts";
import { signingSecretsOfTarget } from "../store/signing.ts";
import type { PlanCaps } from "../store/waiting.ts";
import { firstAttemptsOfBatch, type TakeSlot } from "./batch-attempts.ts";
import type { BatchedFirst } from "./deliveries.ts";
import { notifier } from "./notify.ts";
import type { AttemptOutcome } from "./observability.ts";

/** How deliveries are retried: configuration, so tests can shrink it. */
export interface RetryPolicy extends Backoff {
  /** How long a delivery is retried in all. */
  windowMs: number;
  /** How long one attempt may take before Temporal counts it lost (a worker died). */
  attemptTimeoutMs: number;
}

export interface ActivityDeps {
  sql: Sql;
  retryPolicy: RetryPolicy;
  /**
   * Reaches targets, as the Node edge's streams do: connects only to addresses the target rules
   * allow, checked (and pinned) where it connects; a refused one rejects with `TargetRefused`.
   */
  callTarget: CallTarget;
  /** Real time plus the dev clock's offset, read from Postgres. */
  now: () => Promise<Date>;
  sealingKey: CryptoKey;
  /** How long a finished request stays in the log. */
  logRetentionMs: number;
  /** Each plan's cap on a project's scheduled and held deliveries. */
  waitingCaps: PlanCaps;
  /** Told of every finished attempt (the log and the metrics). */
  observeAttempt: (attempt: AttemptOutcome) => void;
  /** Told of a circuit opened, recovered or disabled (the log and the metrics). */
  observeCircuit: (targetId: string, transition: "opened" | "recovered" | "disabled") => void;
  /**
   * Starts the target's circuit workflow unless it runs: it probes an open circuit and lets the
   * waiting deliveries go once the target may be tried again.
   */
  ensureCircuit: (targetId: string) => Promise<void>;
  /** Each project's share of this worker, by pool (core/project-slots.ts). */
  slots: WorkerSlots;
}

/** The worker's pools: each bounds what one project may have in flight on it. */
export interface WorkerSlots {
  /** Async attempts, first ones and retries. */
  attempts: ProjectSlots;
  sync: ProjectSlots;
  notifications: ProjectSlots;
}

export interface DeliverInput {
  requestId: string;
  /** Who pays: the project, from the pool its key's mode picks. */
  project: string;
  keyMode: KeyMode;
  target: DeliveryTarget;
  headers: Record<string, string>;
  /** The body's bytes in base64; "" when it waits in Postgres under `bodyRef`. */
  bodyBase64: string;
  /** An input queued before bodies travelled in base64 carries its body as text. */
  body?: string;
  bodyRef?: string | undefined;
  /** The one try an open circuit lets through (circuit.ts); any other hold still holds it. */
  probe?: boolean;
  /** The workflow waits itself when the project's share is full (a `Busy` answer). */
  waitsWhenBusy?: boolean;
}

/** A request as its workflow opens it in the log. */
export type RequestRow = requestLog.RequestOpening;

/** Bounds the worker's cache of opened signing keys. */
const MAX_OPENED_KEYS = 10_000;

export function createActivities(deps: ActivityDeps) {
  const { sql, now, sealingKey, retryPolicy, logRetentionMs, waitingCaps } = deps;
  const attempts: AttemptDeps = {
    ...deps,
    signingKeysOf: signingKeys(sql, sealingKey),
    holdOf: (targetId) => circuits.targetHold(sql, targetId),
    // Attempts ending together (a batch's, a busy worker's) share one commit.
    begin: groupCommit(sql),
  };
  return {
    openRequest: (input: RequestRow, status?: "scheduled" | "delivering"): Promise<void> =>
      requestLog.openRequest(sql, input, status),
    /** Cancelled, or how it settled when a target answered 2xx first. */
    cancelRequest: (input: RequestRow): Promise<RequestStatus> =>
      requestLog.cancelRequest(sql, input, waitingCaps),
    /** `targetIds`: the deliveries settled; absent in a call scheduled before they were named. */
    settleRequest: (requestId: string, targetIds: string[] = []): Promise<RequestStatus> =>
      requestLog.settleRequest(sql, requestId, targetIds),
    retryPolicy: async (): Promise<RetryPolicy> => retryPolicy,
    firstAttempt: (
      request: RequestRow,
      delivery: DeliverInput,
      /** The request's only target: an attempt that ends it settles it in the same commit. */
      only: boolean,
    ): Promise<FirstAttempt> => firstAttempt(attempts, request, delivery, only),
    /** A batch's first attempts, all in one local activity (./batch-attempts.ts). */
    firstAttemptsOfBatch: (project: string, requests: DeliveryInput[]): Promise<BatchedFirst[]> => {
      // A batch's requests mostly go to the same targets: each one's hold and keys read once.
      const batch = {
        ...attempts,
        holdOf: readOnce(attempts.holdOf),
        signingKeysOf: readOnce(attempts.signingKeysOf),
      };
      return firstAttemptsOfBatch(
        {
          attempt: (request, delivery, only, takeSlot) =>
            firstAttempt(batch, request, delivery, only, takeSlot),
          settle: (requestId, targetIds) => requestLog.settleRequest(sql, requestId, targetIds),
          slots: deps.slots.attempts,
        },
        project,
        requests,
      );
    },
    deliver: (input: DeliverInput): Promise<number | "held" | Busy> => deliver(attempts, input),
    holdDelivery: async (targetId: string, workflowId: string): Promise<Hold | null> => {
      const hold = await circuits.holdDelivery(sql, targetId, workflowId, waitingCaps);
      // Whatever befell the start when it opened, a delivery waiting on it sees it probed.
      if (hold === "circuit_open") await deps.ensureCircuit(targetId);
      return hold;
    },
    circuitState: (targetId: string): Promise<circuits.CircuitState> =>
      circuits.circuitState(sql, targetId),
    releaseHeld: (targetId: string, limit: number, probe: boolean): Promise<string[]> =>
      circuits.releaseHeld(sql, targetId, limit, waitingCaps, probe),
    recordProbeFailed: (targetId: string): Promise<void> =>
      circuits.recordProbeFailed(sql, targetId),
    disableTarget: async (targetId: string): Promise<boolean> => {
      const disabled = await circuits.disableTarget(sql, targetId);
      if (disabled) deps.observeCircuit(targetId, "disabled");
      return disabled;
    },
    relaySyncCall: async (input: SyncInput): Promise<SyncOutcome> => {
      const release = deps.slots.sync.take(input.project);
      if (!release) return { kind: "busy" };
      return relaySyncCall(attempts, input).finally(release);
    },
    /** A stream record queued before edges sent them to the control plane (workflows.ts). */
    recordStreamCall: (record: StreamRecord): Promise<void> => requestLog.recordStream(sql, record),
    notify: inProjectShare(
      deps.slots.notifications,
      notifier({ sql, sealingKey, callTarget: deps.callTarget, now }),
    ),
    rotateExpiringKeys: async (): Promise<number> =>
      rotateExpiringKeys(sql, await now(), sealingKey),
    pruneExpiredRequests: async (): Promise<Pruned> =>
      pruneRequestLog(sql, await now(), logRetentionMs),
  };
}

/** An attempt its project's share of the worker turned away: how long it waits, on a timer. */
export interface Busy {
  kind: "busy";
  waitMs: number;
}

function busy(slots: ProjectSlots, project: string): Busy {
  return { kind: "busy", waitMs: slots.waitMs(project, Math.random()) };
}

/** A notification over its project's share is tried again as a busy attempt would be. */
function inProjectShare<T>(
  slots: ProjectSlots,
  send: (event: NotificationEvent) => Promise<T>,
): (event: NotificationEvent) => Promise<T> {
  return async (event) => {
    const release = slots.take(event.project);
    if (!release) {
      throw ApplicationFailure.retryable(
        "this project has too many notifications in flight on this worker",
        "ProjectBusy",
        { nextRetryDelay: slots.waitMs(event.project, Math.random()) },
      );
    }
    return send(event).finally(release);
  };
}

/** What an attempt at a target needs of the worker. */
interface AttemptDeps
  extends Pick<
    ActivityDeps,
    | "sql"
    | "now"
    | "callTarget"
    | "observeAttempt"
    | "observeCircuit"
    | "ensureCircuit"
    | "retryPolicy"
    | "slots"
  > {
  /** The keys that sign for a target's endpoint at a time (`signingKeys`). */
  signingKeysOf: (targetId: string, at: Date) => Promise<SigningKey[]>;
  /** Whether a target's deliveries wait (an open circuit, a pause), and why. */
  holdOf: (targetId: string) => Promise<Hold | null>;
  /** The transaction an attempt's end is written in (store/group-commit.ts). */
  begin: Begin;
}

/**
 * A request's first attempt at a target, run as a local activity in the workflow's first task:
 * opens the request in the log, then tries once. Answers its verdict, never throws for the
 * target's sake, so a request whose targets all answer costs Temporal no other task. A target
 * whose deliveries wait (open circuit, paused) is not tried: the request is opened and the
 * verdict says so; nor is one its project's share of the worker has no room for ("busy": the
 * workflow waits on a timer, holding no slot, and tries again).
 */
async function firstAttempt(
  deps: AttemptDeps,
  request: RequestRow,
  delivery: DeliverInput,
  only: boolean,
  takeSlot: TakeSlot = async () => deps.slots.attempts.take(delivery.project),
): Promise<FirstAttempt> {
  const hold = await deps.holdOf(delivery.target.id);
  if (hold) {
    await requestLog.openRequest(deps.sql, request);
    return { kind: "held", hold };
  }
  const release = await takeSlot();
  if (!release) return busy(deps.slots.attempts, delivery.project);
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
async function deliver(deps: AttemptDeps, input: DeliverInput): Promise<number | "held" | Busy> {
  const hold = await deps.holdOf(input.target.id);
  if (hold && !(input.probe && hold === "circuit_open")) return "held";
  const release = deps.slots.attempts.take(input.project);
  if (!release) {
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
  throw ApplicationFailure.create({
    message: verdict.message,
    type: verdict.type,
    ...(verdict.kind === "failed" ? { nonRetryable: true } : { nextRetryDelay: verdict.delayMs }),
  });
}

/**
 * A sync call, whole: open the request, call the target once, log it, close the request. One
 * local activity, so the caller waits for one workflow task and no more; two commits, one of them
 * beside the call.
 */
async function relaySyncCall(deps: AttemptDeps, input: SyncInput): Promise<SyncOutcome> {
  const { target, headers, bodyBase64, ownsStatus, ...request } = input;
  const sent = await postToTarget(deps, {
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
  });
  return syncOutcome(sent);
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
  finishing?: (sent: Sent) => requestLog.Finishing | undefined;
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
  // Signed on the stack's clock (the dev clock's, under tests), as the edge signs streams.
  const signedAt = await deps.now();
  const signingKeys = await deps.signingKeysOf(target.id, signedAt);
  const starting = requestLog.startAttempt(deps.sql, {
    opening: call.opening,
    requestId,
    target,
    startedAt: new Date(),
  });
  starting.catch(() => {}); // awaited below; a failure is not unhandled meanwhile
  // An async attempt is in the log before the call, so one lost with its worker shows.
  const attempt = call.sync ? 1 : (await starting).attempt;
  const started = performance.now();
  const called = await callAndRead(
    deps.callTarget,
    {
      requestId,
      target,
      attempt,
      callerHeaders: call.headers,
      body,
      signingKeys,
      signedAt,
      signal: Context.current().cancellationSignal,
      timeoutBounds: "answer",
      // The activity's span, when the worker traces (Temporal's interceptor started it).
      trace: activeTrace(),
    },
    call.sync === true,
  );
  const sent: Sent = { attempt, ...called };
  const ended = await endAttempt(
    deps,
    (await starting).id,
    {
      requestId,
      project: call.project,
      keyMode: call.keyMode,
      target,
      attempt,
      statusCode: sent.answer?.status ?? null,
      latencyMs: Math.round(performance.now() - started),
      error: sent.failure?.message ?? null,
      billedBytes: body.byteLength,
      // A sync call answers its caller: its target's failures are the caller's to see.
      circuit: call.sync ? "neutral" : circuitOutcome(verdictOn(sent, deps.retryPolicy)),
      lastTry: call.sync === true,
    },
    call.finishing?.(sent),
  );
  if (ended.circuit) {
    deps.observeCircuit(target.id, ended.circuit);
    if (ended.circuit === "opened") await deps.ensureCircuit(target.id);
  }
  return { ...sent, status: ended.status };
}

/**
 * The call, and its answer: a sync one read whole up to the cap (its body null past it), an async
 * one's status and headers only, its body dropped unread.
 */
async function callAndRead(
  callTarget: CallTarget,
  input: TargetCallInput,
  sync: boolean,
): Promise<Pick<Sent, "answer" | "failure">> {
  const sent = await sendToTarget(callTarget, input);
  if ("failure" in sent) return { answer: null, failure: sent.failure };
  const { status, headers } = sent.answer;
  if (!sync) {
    discardAnswer(sent);
    return { answer: { status, headers, body: null }, failure: null };
  }
  const read = await readAnswer(sent, MAX_SYNC_ANSWER_BYTES);
  if ("failure" in read) return { answer: null, failure: read.failure };
  const body = read.body === TOO_LARGE ? null : read.body;
  return { answer: { status, headers, body }, failure: null };
}

/** A request's body: from Postgres when it waits there, else from the input itself. */
async function bodyOf(sql: Sql, input: DeliverInput): Promise<Uint8Array<ArrayBuffer>> {
  if (input.bodyRef) return loadBody(sql, input.bodyRef);
  return input.body !== undefined
    ? new TextEncoder().encode(input.body)
    : decodeBody(input.bodyBase64);
}

/** Ends an attempt: told to the log and the metrics, then recorded (and charged) in the log. */
function endAttempt(
  deps: Pick<AttemptDeps, "sql" | "observeAttempt" | "begin">,
  attemptId: string,
  a: {
    requestId: string;
    project: string;
    keyMode: KeyMode;
    target: DeliveryTarget;
    attempt: number;
    statusCode: number | null;
    latencyMs: number;
    error: string | null;
    billedBytes: number;
    circuit: CircuitOutcome;
    lastTry: boolean;
  },
  finishing?: requestLog.Finishing,
): Promise<requestLog.AttemptEnded> {
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
  };
  const { statusCode, latencyMs, error, circuit, lastTry } = a;
  return requestLog.endAttempt(
    deps.sql,
    attemptId,
    { statusCode, latencyMs, error, charge, circuit, lastTry, endedAt: new Date() },
    finishing,
    deps.begin,
  );
}

/**
 * The keys that sign for a target's endpoint now, read per attempt (a rotation shows at once, an
 * overlap ends on time); none for a target whose endpoint is gone. The plaintext only passes
 * through here, never into a workflow input, history or log. Opened keys are kept by secret id:
 * a sealed secret never changes, so they stay valid.
 */
function signingKeys(sql: Sql, sealingKey: CryptoKey) {
  const openedKeys = new Map<string, Promise<CryptoKey>>();
  return async (targetId: string, at: Date): Promise<SigningKey[]> => {
    const sealed = await signingSecretsOfTarget(sql, targetId, at);
    if (openedKeys.size > MAX_OPENED_KEYS) openedKeys.clear();
    return Promise.all(
      sealed.map(async (secret) => {
        let key = openedKeys.get(secret.id);
        if (!key) {
          key = open(sealingKey, new Uint8Array(secret.sealedSecret), secret.id).then((plain) =>
            importSigningKey(decodeSigningSecret(plain)),
          );
          key.catch(() => openedKeys.delete(secret.id));
          openedKeys.set(secret.id, key);
        }
        return { key: await key, expiresAt: secret.expiresAt };
      }),
    );
  };
}

/** `read`, asked once per target: the first answer serves the later calls. */
function readOnce<T, Rest extends unknown[]>(
  read: (targetId: string, ...rest: Rest) => Promise<T>,
): (targetId: string, ...rest: Rest) => Promise<T> {
  const answers = new Map<string, Promise<T>>();
  return (targetId, ...rest) => {
    let answer = answers.get(targetId);
    if (!answer) {
      answer = read(targetId, ...rest);
      answers.set(targetId, answer);
    }
    return answer;
  };
}

/** The verdict on an attempt at an async target. */
function verdictOn({ attempt, answer, failure }: Sent, policy: RetryPolicy): AttemptVerdict {
  const seen = {
    status: answer?.status ?? null,
    retryAfter: answer?.headers.get("retry-after") ?? null,
    error: failure?.message ?? null,
    refused: failure?.kind === "refused",
  };
  return attemptVerdict(seen, attempt, policy, new Date());
}

/**
 * A first attempt's verdict, and the request's status when the attempt settled it; or, for a
 * target whose deliveries wait, why it was not tried.
 */
export type FirstAttempt =
  | (AttemptVerdict & { settled?: RequestStatus })
  | { kind: "held"; hold: Hold }
  | Busy;

/** A target's answer to an attempt. */
interface Answer {
  status: number;
  headers: Headers;
  /** Read only when asked for (sync); null when longer than the sync cap. */
  body: Uint8Array | null;
}

/** What a call to a target came to. */
interface Sent {
  attempt: number;
  answer: Answer | null;
  /** Why there is no answer: refused, timed out or unreachable, as the log says it. */
  failure: TargetFailure | null;
}

function syncOutcome({ answer, failure }: Sent): SyncOutcome {
  if (!answer) {
    return failure?.kind === "timeout"
      ? { kind: "timeout" }
      : { kind: "unreachable", error: failure?.message ?? "" };
  }
  if (answer.body === null) return { kind: "too_large" };
  return {
    kind: "answered",
    status: answer.status,
    headers: Object.fromEntries(answer.headers),
    bodyBase64: Buffer.from(answer.body).toString("base64"),
  };
}

export type Activities = ReturnType<typeof createActivities>;
