/**
 * Sync calls an edge hands this worker (the edge's RELAY_WORKER_URL): the worker starts the
 * call's workflow itself, asking Temporal for eager start, so the workflow's first task comes back
 * in the start's answer rather than through matching. It answers the edge as soon as the call's
 * local activity has logged and charged the call: the workflow's completion then goes through
 * Temporal while the caller already has its answer, and nothing waits for a long poll. The
 * workflow is the one the edge would start (same id, start request id, search attributes,
 * fairness key and timeout), so the Temporal UI finds it by request id as before.
 *
 * Where Temporal sent the task to another worker (this one had no free slot), the workflow's
 * result answers instead. Where this listener refuses or fails, the edge starts the workflow
 * through Temporal's HTTP API as it always could; the shared start request id makes that a
 * repeat of any start made here, not a second call.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type Client, WorkflowFailedError } from "@temporalio/client";
// The SDK's own conversion to protobuf's Duration (seconds as a Long), as its client makes starts.
import { msToTs } from "@temporalio/common";
import type { NativeConnection } from "@temporalio/worker";
import { z } from "zod";
import {
  acceptedStatus,
  SYNC_CALLS_PATH,
  type SyncInput,
  type SyncOutcome,
  syncBudgetSeconds,
  syncWorkflowId,
} from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { jsonPayload, type PayloadCipher } from "../core/payload-codec.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import { readCapped, TOO_LARGE } from "../core/read-capped.ts";
import { hashSecret, timingSafeEqual } from "../core/secrets.ts";
import {
  fairnessOf,
  requestSearchAttributes,
  SYNC_TASK_QUEUE,
  SYNC_WORKFLOW,
  TRACE_HEADER,
} from "../core/temporal.ts";

/** Temporal refuses a payload past 2 MB: no sync call's input, as the workflow's, is larger. */
export const MAX_SYNC_CALL_BYTES = 2 * 1024 * 1024;

/** The trace headers an edge may pass on (W3C trace context). */
const TRACE_HEADERS = ["traceparent", "tracestate"] as const;

/**
 * What this worker's sync calls answer, by workflow id: the local activity settles an entry as
 * it ends (`undefined` when it failed: the workflow's own end then says how).
 */
export class SyncAnswers {
  private readonly waiting = new Map<string, (outcome: SyncOutcome | undefined) => void>();

  /** Expects `workflowId`'s answer; `forget` when no longer waiting. */
  expect(workflowId: string): { answer: Promise<SyncOutcome | undefined>; forget(): void } {
    const answer = new Promise<SyncOutcome | undefined>((resolve) => {
      this.waiting.set(workflowId, resolve);
    });
    return { answer, forget: () => this.waiting.delete(workflowId) };
  }

  settle(workflowId: string, outcome: SyncOutcome | undefined): void {
    this.waiting.get(workflowId)?.(outcome);
    this.waiting.delete(workflowId);
  }
}

/**
 * What the listener reads of a call: an edge authenticated by its token made it, so only what
 * this worker acts on is checked here; the workflow reads the rest as it reads an edge's start.
 */
const syncCallSchema = z.looseObject({
  requestId: z.string().min(1).max(200),
  project: z.string().min(1).max(200),
  line: z.string().max(200),
  endpoint: z.string().max(200),
  ownsStatus: z.boolean(),
  target: z.looseObject({
    id: z.string().min(1).max(200),
    timeoutSeconds: z.number().int().min(1).max(90),
  }),
});

export interface SyncCallsOptions {
  /** The edges' token (RELAY_EDGE_TOKEN): only edges hand sync calls over. */
  edgeToken: string;
  /** How many calls one project, and all together, may have waiting here. */
  slots: ProjectSlots;
  answers: SyncAnswers;
  /** Starts the call's workflow; true when its first task came back to this worker. */
  start(input: SyncInput, workflowId: string, trace: Record<string, string>): Promise<boolean>;
  /** The workflow's result, when its local activity ran elsewhere or failed. */
  result(workflowId: string): Promise<SyncOutcome>;
  /** Told of each call started, eagerly or not (a metric). */
  observeStart(eager: boolean): void;
  logError(fields: Record<string, unknown>, message: string): void;
}

/**
 * The listener's route for sync calls: answers POST SYNC_CALLS_PATH with the call's outcome
 * (200), or an error body; false for any other path (the caller's own).
 */
export function syncCallsRoute(options: SyncCallsOptions) {
  const tokenHash = hashSecret(options.edgeToken);
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (new URL(req.url ?? "/", "http://worker").pathname !== SYNC_CALLS_PATH) return false;
    void answer(req, options, tokenHash).then(
      (answered) => send(res, 200, answered),
      (error: unknown) => {
        const refusal = RelayError.from(error);
        if (refusal.code === "internal") {
          options.logError({ err: error }, "a sync call handed over failed");
        }
        send(res, refusal.status, refusal.toBody());
      },
    );
    return true;
  };
}

async function answer(
  req: IncomingMessage,
  options: SyncCallsOptions,
  tokenHash: Promise<Uint8Array>,
): Promise<SyncOutcome> {
  if (req.method !== "POST") throw new RelayError("method_not_allowed", "POST only");
  const presented = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  if (!presented || !timingSafeEqual(await hashSecret(presented), await tokenHash)) {
    throw new RelayError("unauthenticated", "an edge's token is required");
  }
  const body = await readCapped(req, MAX_SYNC_CALL_BYTES);
  if (body === TOO_LARGE) throw new RelayError("payload_too_large", "the call is too large");
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw new RelayError("bad_request", "the call is not JSON");
  }
  const checked = syncCallSchema.safeParse(parsed);
  if (!checked.success) throw new RelayError("bad_request", "the call is not a sync call");
  const input = checked.data as unknown as SyncInput;
  const release = options.slots.take(input.project);
  if (!release) throw new RelayError("unavailable", "this worker has its share of sync calls");
  const workflowId = syncWorkflowId(input);
  const expected = options.answers.expect(workflowId);
  try {
    const trace = Object.fromEntries(
      TRACE_HEADERS.flatMap((name) => {
        const value = req.headers[name];
        return typeof value === "string" ? [[name, value]] : [];
      }),
    );
    const eager = await options.start(input, workflowId, trace);
    options.observeStart(eager);
    // Its task went elsewhere (no free slot here): the workflow's result answers at once, or this
    // worker's activity if matching hands the task back here after all.
    return await withBudget(
      answerOrResult(
        expected.answer,
        () => options.result(workflowId),
        eager ? RESULT_BACKSTOP_MS : 0,
      ),
      syncBudgetSeconds(input.target),
    );
  } finally {
    expected.forget();
    release();
  }
}

/**
 * How long an eager start's answer is awaited from this worker's activity alone: past it the
 * workflow's result is asked too, since a first task handed back may still run elsewhere (Core
 * turned it down, or it failed and was retried). One long poll for a slow call, none for the rest.
 */
const RESULT_BACKSTOP_MS = 1000;

/**
 * The answer this worker's activity gives, or the workflow's result: asked after `afterMs`, or
 * at once when the activity here failed (its answer `undefined`); asked once at most.
 */
async function answerOrResult(
  here: Promise<SyncOutcome | undefined>,
  result: () => Promise<SyncOutcome>,
  afterMs: number,
): Promise<SyncOutcome> {
  let asked: Promise<SyncOutcome> | undefined;
  const ask = () => {
    asked ??= result();
    return asked;
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const backstop = new Promise<SyncOutcome>((resolve, reject) => {
    timer = setTimeout(() => ask().then(resolve, reject), afterMs);
  });
  try {
    return (await Promise.race([here, backstop])) ?? (await ask());
  } finally {
    clearTimeout(timer);
  }
}

/** `answer`, unless the call's budget passes first: then the target did not answer in time. */
async function withBudget<T>(answer: Promise<T>, seconds: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RelayError("target_timeout", "the sync target did not answer in time")),
      seconds * 1000,
    );
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/**
 * Starts a sync call's workflow on this worker's connection, as the edge starts it through the
 * HTTP API, with eager start asked: Temporal answers with the workflow's first task when this
 * worker has a slot free for it. True when it did.
 */
export function eagerSyncStarter(
  connection: NativeConnection,
  namespace: string,
  cipher: PayloadCipher,
): SyncCallsOptions["start"] {
  return async (input, workflowId, trace) => {
    const [sealed] = await cipher.encode([jsonPayload(input)]);
    const indexed = requestSearchAttributes(input, acceptedStatus(input));
    const response = await connection.workflowService
      .startWorkflowExecution({
        namespace,
        identity: `${process.pid}@relay-worker`,
        // The edge's start request id for the same call: its start after this one is a repeat.
        requestId: workflowId,
        workflowId,
        workflowType: { name: SYNC_WORKFLOW },
        taskQueue: { name: SYNC_TASK_QUEUE },
        input: { payloads: sealed ? [sealed] : [] },
        workflowExecutionTimeout: msToTs(syncBudgetSeconds(input.target) * 1000),
        searchAttributes: {
          indexedFields: Object.fromEntries(
            Object.entries(indexed).map(([name, value]) => [name, jsonPayload(value)]),
          ),
        },
        ...(Object.keys(trace).length > 0 && {
          header: { fields: { [TRACE_HEADER]: jsonPayload(trace) } },
        }),
        priority: fairnessOf(input.project),
        requestEagerExecution: true,
      })
      .catch((error: unknown) => {
        throw Object.assign(new RelayError("unavailable", "Temporal did not take the start"), {
          cause: error,
        });
      });
    return response.eagerWorkflowTask != null;
  };
}

/**
 * The workflow's result, sealed payloads opened by `client`'s codec. A workflow that ended
 * otherwise (timed out, failed) is a target that did not answer in time, as the edge reads it.
 */
export const syncResultOf =
  (client: Client): SyncCallsOptions["result"] =>
  (workflowId) =>
    client.workflow
      .getHandle<() => Promise<SyncOutcome>>(workflowId)
      .result()
      .catch((error: unknown) => {
        throw error instanceof WorkflowFailedError
          ? new RelayError("target_timeout", "the sync target did not answer in time")
          : Object.assign(new RelayError("unavailable", "Temporal did not answer"), {
              cause: error,
            });
      });
