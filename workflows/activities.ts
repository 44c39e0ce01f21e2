/**
 * Relay's activities: the I/O of its workflows. Every call to a target is logged as an attempt
 * before its outcome is reported to Temporal, so the request log shows every try.
 */
import { ApplicationFailure, Context } from "@temporalio/activity";
import {
  ATTEMPT_HEARTBEAT_MS,
  type AttemptVerdict,
  attemptVerdict,
  type Backoff,
  classifyStatus,
  type DeliveryTarget,
  decodeBody,
  MAX_SYNC_ANSWER_BYTES,
  type StreamRecord,
  type SyncInput,
  type SyncOutcome,
  syncStatus,
} from "../core/delivery.ts";
import type { KeyMode, RequestStatus } from "../core/model.ts";
import { open } from "../core/sealing.ts";
import {
  decodeSigningSecret,
  importSigningKey,
  type SigningKey,
  webhookHeaders,
} from "../core/signing.ts";
import { deliveryId, targetRequest } from "../core/target-request.ts";
import { deliveryAddressProblem, type ResolveHost, type TargetRules } from "../core/targets.ts";
import { loadBody } from "../store/bodies.ts";
import type { Sql } from "../store/db.ts";
import * as requestLog from "../store/request-log.ts";
import { type Pruned, pruneRequestLog } from "../store/retention.ts";
import { rotateExpiringKeys } from "../store/rotation.ts";
import { signingSecretsOfTarget } from "../store/signing.ts";
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
  /** Reaches targets: connects only to addresses `targetRules` allow, checked as it connects. */
  fetch: typeof fetch;
  /** Real time plus the dev clock's offset, read from Postgres. */
  now: () => Promise<Date>;
  sealingKey: CryptoKey;
  /** How long a finished request stays in the log. */
  logRetentionMs: number;
  /** Told of every finished attempt (the log and the metrics). */
  observeAttempt: (attempt: AttemptOutcome) => void;
  /** Where deliveries may go; each target's addresses are checked before each attempt. */
  targetRules: TargetRules;
  resolveHost: ResolveHost;
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
}

/** A request as its workflow opens it in the log. */
export type RequestRow = requestLog.RequestOpening;

/** Bounds the worker's cache of opened signing keys. */
const MAX_OPENED_KEYS = 10_000;

interface Answer {
  status: number;
  headers: Headers;
  /** Read only when asked for (sync); null when longer than the sync cap. */
  body: Uint8Array | null;
}

export function createActivities({
  sql,
  fetch,
  now,
  sealingKey,
  retryPolicy,
  logRetentionMs,
  targetRules,
  resolveHost,
  observeAttempt,
}: ActivityDeps) {
  const signingKeysOf = signingKeys(sql, sealingKey);

  /** Ends an attempt: told to the log and the metrics, then recorded (and charged) in the log. */
  function endAttempt(
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
    },
    finishing?: requestLog.Finishing,
  ): Promise<RequestStatus | undefined> {
    observeAttempt({
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
    const { statusCode, latencyMs, error } = a;
    return requestLog.endAttempt(
      sql,
      attemptId,
      { statusCode, latencyMs, error, charge },
      finishing,
    );
  }

  /**
   * One POST to a target, logged (and charged, by the body's bytes) as an attempt whatever
   * comes of it. A target whose name now resolves to a refused address is logged as refused
   * and never called; a redirect is its answer, not followed.
   */
  async function postToTarget(
    call: DeliverInput & {
      /** A request's first attempt opens the request in the log (startAttempt). */
      opening?: RequestRow;
      /**
       * A sync call: read the answer; tried once, so it is attempt 1, logged beside the call
       * rather than before it (a worker lost mid-call leaves it in the log with no outcome).
       */
      sync?: boolean;
      /** The request's status after this attempt, when it ends the request. */
      finishing?: (sent: Sent) => requestLog.Finishing | undefined;
    },
  ): Promise<Sent & { status: RequestStatus | undefined }> {
    const { requestId, target, headers } = call;
    const body = call.bodyRef
      ? await loadBody(sql, call.bodyRef)
      : call.body !== undefined
        ? new TextEncoder().encode(call.body)
        : decodeBody(call.bodyBase64);
    // Signed on the stack's clock (the dev clock's, under tests), as the edge signs streams.
    const signedAt = await now();
    const signature = await webhookHeaders(
      await signingKeysOf(target.id, signedAt),
      deliveryId(requestId, target),
      signedAt,
      body,
    );
    const starting = requestLog.startAttempt(sql, {
      opening: call.opening,
      requestId,
      target,
      startedAt: new Date(),
    });
    starting.catch(() => {}); // awaited below; a failure is not unhandled meanwhile
    // An async attempt is in the log before the call, so one lost with its worker shows.
    const attempt = call.sync ? 1 : (await starting).attempt;
    const started = performance.now();
    const timeout = AbortSignal.timeout(target.timeoutSeconds * 1000);
    const refusal = await deliveryAddressProblem(target.targetUrl, targetRules, resolveHost);
    let answer: Answer | null = null;
    let error: string | null = refusal;
    if (!refusal) {
      try {
        const response = await fetch(
          target.targetUrl,
          targetRequest({
            requestId,
            target,
            attempt,
            callerHeaders: headers,
            signature,
            body,
            signal: AbortSignal.any([Context.current().cancellationSignal, timeout]),
          }),
        );
        const answerBody = call.sync ? await readCapped(response, MAX_SYNC_ANSWER_BYTES) : null;
        if (!call.sync) await response.body?.cancel();
        answer = { status: response.status, headers: response.headers, body: answerBody };
      } catch (cause) {
        error = describeFailure(cause);
      }
    }
    const sent: Sent = { attempt, answer, error, timedOut: timeout.aborted, refused: !!refusal };
    const status = await endAttempt(
      (await starting).id,
      {
        requestId,
        project: call.project,
        keyMode: call.keyMode,
        target,
        attempt,
        statusCode: answer?.status ?? null,
        latencyMs: Math.round(performance.now() - started),
        error,
        billedBytes: body.byteLength,
      },
      call.finishing?.(sent),
    );
    return { ...sent, status };
  }

  return {
    openRequest: (input: RequestRow): Promise<void> => requestLog.openRequest(sql, input),
    settleRequest: (requestId: string): Promise<RequestStatus> =>
      requestLog.settleRequest(sql, requestId),
    retryPolicy: async (): Promise<RetryPolicy> => retryPolicy,

    /**
     * A request's first attempt at a target, run as a local activity in the workflow's first
     * task: opens the request in the log, then tries once. Answers its verdict, never throws for
     * the target's sake, so a request whose targets all answer costs Temporal no other task.
     */
    async firstAttempt(
      request: RequestRow,
      delivery: DeliverInput,
      /** The request's only target: an attempt that ends it settles it in the same commit. */
      only: boolean,
    ): Promise<FirstAttempt> {
      const sent = await postToTarget({
        ...delivery,
        opening: request,
        finishing: (sent) =>
          only && verdictOn(sent, retryPolicy).kind !== "retry" ? "settled" : undefined,
      });
      return { ...verdictOn(sent, retryPolicy), ...(sent.status && { settled: sent.status }) };
    },

    /** A later attempt, an activity Temporal retries (or not) by the verdict it throws. */
    async deliver(input: DeliverInput): Promise<number> {
      const context = Context.current();
      const beating = setInterval(() => context.heartbeat(), ATTEMPT_HEARTBEAT_MS);
      const verdict = verdictOn(
        await postToTarget(input).finally(() => clearInterval(beating)),
        retryPolicy,
      );
      if (verdict.kind === "delivered") return verdict.status;
      throw ApplicationFailure.create({
        message: verdict.message,
        type: verdict.type,
        ...(verdict.kind === "failed"
          ? { nonRetryable: true }
          : { nextRetryDelay: verdict.delayMs }),
      });
    },

    /**
     * A sync call, whole: open the request, call the target once, log it, close the request.
     * One local activity, so the caller waits for one workflow task and no more; two commits,
     * one of them beside the call.
     */
    async relaySyncCall(input: SyncInput): Promise<SyncOutcome> {
      const { target, headers, bodyBase64, ownsStatus, ...request } = input;
      const sent = await postToTarget({
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
    },

    /** A stream the edge proxied: into the log, billed by the bytes it streamed back. */
    async recordStreamCall(record: StreamRecord): Promise<void> {
      const { target, ownsStatus, statusCode, latencyMs, bytes, error, ...request } = record;
      const startedAt = new Date(Date.parse(request.receivedAt));
      const { id: attemptId, attempt } = await requestLog.startAttempt(sql, {
        ...request,
        opening: request,
        target,
        startedAt,
      });
      const delivered = statusCode !== null && classifyStatus(statusCode) === "delivered";
      await endAttempt(
        attemptId,
        { ...request, target, attempt, statusCode, latencyMs, error, billedBytes: bytes },
        ownsStatus ? (delivered ? "delivered" : "failed") : undefined,
      );
    },

    async rotateExpiringKeys(): Promise<number> {
      return rotateExpiringKeys(sql, await now(), sealingKey);
    },

    async pruneExpiredRequests(): Promise<Pruned> {
      return pruneRequestLog(sql, await now(), logRetentionMs);
    },
  };
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

/** The verdict on an attempt at an async target. */
function verdictOn({ attempt, answer, error, refused }: Sent, policy: RetryPolicy): AttemptVerdict {
  const seen = {
    status: answer?.status ?? null,
    retryAfter: answer?.headers.get("retry-after") ?? null,
    error,
    refused,
  };
  return attemptVerdict(seen, attempt, policy, new Date());
}

/**
 * A failed call in the log: fetch's own error and what caused it (a refused or unreachable
 * address says so only in its cause).
 */
function describeFailure(failure: unknown): string {
  if (!(failure instanceof Error)) return String(failure);
  const { cause } = failure;
  const described = `${failure.name}: ${failure.message}`;
  return cause instanceof Error ? `${described} (${cause.message})` : described;
}

/** A first attempt's verdict, and the request's status when the attempt settled it. */
export type FirstAttempt = AttemptVerdict & { settled?: RequestStatus };

/** What a call to a target came to. */
interface Sent {
  attempt: number;
  answer: Answer | null;
  error: string | null;
  timedOut: boolean;
  refused: boolean;
}

function syncOutcome({ answer, error, timedOut }: Sent): SyncOutcome {
  if (!answer) return timedOut ? { kind: "timeout" } : { kind: "unreachable", error: error ?? "" };
  if (answer.body === null) return { kind: "too_large" };
  return {
    kind: "answered",
    status: answer.status,
    headers: Object.fromEntries(answer.headers),
    bodyBase64: Buffer.from(answer.body).toString("base64"),
  };
}

/** The whole body, or null past `limit` bytes. */
async function readCapped(response: Response, limit: number): Promise<Uint8Array | null> {
  if (!response.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body.cancel().catch(() => {});
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export type Activities = ReturnType<typeof createActivities>;
