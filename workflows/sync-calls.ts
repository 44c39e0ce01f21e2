/**
 * Sync calls an edge hands this worker (the edge's RELAY_WORKER_URL). Calls of a project that
 * arrive while its last batch starts and runs go together in one workflow (`relaySyncBatch`),
 * as the edges' async calls do (core/grouped.ts): a workflow per call costs Temporal and the
 * worker most of a sync call's CPU under load, one for several a fraction of it each. A call
 * arriving alone goes alone (after one turn of the event loop, for those handed over with it),
 * so one at a time waits for nothing.
 *
 * The worker starts the batch itself, asking Temporal for eager start, so its first task comes
 * back in the start's answer rather than through matching, and its local activity makes the
 * calls here. Each call answers its edge as soon as it is logged and charged: its answer goes
 * to its listener in this process, never through Temporal's history, and the workflow closes
 * off the caller's path.
 *
 * A batch's activity makes only the calls a listener here still waits for. One whose batch ran
 * elsewhere (Temporal sent the task to another worker) or too late (its listener gave up) is
 * never made by the batch: its listener answers its edge 503, and the edge starts the call's
 * own workflow through Temporal's HTTP API (`relaySync`), so no call is made twice by Relay's
 * choice. The batch carries its calls' request ids (RelayRequestIds), so the Temporal UI finds
 * a call's batch by its request id.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client } from "@temporalio/client";
// The SDK's own conversion to protobuf's Duration (seconds as a Long), as its client makes starts.
import { msToTs } from "@temporalio/common";
import type { NativeConnection } from "@temporalio/worker";
import { z } from "zod";
import {
  SYNC_CALLS_PATH,
  type SyncInput,
  type SyncOutcome,
  syncBudgetSeconds,
  syncWorkflowId,
} from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { type Behind, grouped } from "../core/grouped.ts";
import { jsonPayload, type PayloadCipher } from "../core/payload-codec.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import { readCapped, TOO_LARGE } from "../core/read-capped.ts";
import { timingSafeEqual } from "../core/secrets.ts";
import {
  batchSearchAttributes,
  fairnessOf,
  SYNC_BATCH_WORKFLOW,
  SYNC_TASK_QUEUE,
  TRACE_HEADER,
} from "../core/temporal.ts";
import { callerTrace } from "../core/tracing.ts";
import { sha256 } from "../platform/node-crypto.ts";
import type { AnswerHere, SyncAnswers } from "./sync-answers.ts";

/** Temporal refuses a payload past 2 MB: no sync call's input, as the workflow's, is larger. */
export const MAX_SYNC_CALL_BYTES = 2 * 1024 * 1024;

/**
 * Calls one batch carries at most, and their inputs' bytes: its input is one payload (Temporal
 * warns past 256 KiB), and its request ids one search attribute (2 KB: 64 ids fit). A larger
 * call goes alone.
 */
const SYNC_BATCH_MAX_CALLS = 32;
const SYNC_BATCH_MAX_BYTES = 256 * 1024;

/** The trace headers an edge may pass on (W3C trace context). */
const TRACE_HEADERS = ["traceparent", "tracestate"] as const;

/** A batch of one project's calls, as its workflow starts. */
export interface SyncBatch {
  workflowId: string;
  project: string;
  calls: SyncInput[];
  /** Its first call's trace context: the workflow's span is a child of that call's. */
  trace: Record<string, string>;
}

export interface SyncCallsOptions {
  /** The edges' token (RELAY_EDGE_TOKEN): only edges hand sync calls over. */
  edgeToken: string;
  /** How many calls one project, and all together, may have waiting here. */
  slots: ProjectSlots;
  /**
   * How long a batch of several calls, answered, waits for its callers' next calls to gather
   * behind it (RELAY_SYNC_LINGER_MS): those calls then go in one batch, not two. 0: never.
   */
  lingerMs: number;
  answers: SyncAnswers;
  /** Starts a batch's workflow; true when its first task came back to this worker. */
  start(batch: SyncBatch): Promise<boolean>;
  /** Settles once a batch's workflow has closed, however it ended. */
  closed(workflowId: string): Promise<unknown>;
  /** Told of each call started, eagerly or not (a metric). */
  observeStart(eager: boolean): void;
  logError(fields: Record<string, unknown>, message: string): void;
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

/** A call handed over, as it waits to join a batch. */
interface Handed {
  call: SyncInput;
  claimed: Promise<void>;
  answered: Promise<unknown>;
  bytes: number;
  trace: Record<string, string>;
}

/** A call's batch, started: whether eagerly, and (asked once per batch) when it closed. */
interface Started {
  eager: boolean;
  closed(): Promise<unknown>;
}

/**
 * The listener's route for sync calls: answers POST SYNC_CALLS_PATH with the call's outcome
 * (200), or an error body; false for any other path (the caller's own).
 */
export function syncCallsRoute(options: SyncCallsOptions) {
  const tokenHash = sha256(options.edgeToken);
  const joinBatch = grouped<Handed, Started>({
    maxItems: SYNC_BATCH_MAX_CALLS,
    firstWaitsATurn: true,
    fits: (gathered, next) =>
      gathered.reduce((bytes, handed) => bytes + handed.bytes, next.bytes) <= SYNC_BATCH_MAX_BYTES,
    run: (project, handed, answerNow, behind) =>
      startBatch(options, { project, handed, answerNow, behind }),
  });
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (new URL(req.url ?? "/", "http://worker").pathname !== SYNC_CALLS_PATH) return false;
    void answer(req, options, tokenHash, joinBatch).then(
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

/**
 * How long a project's next batch gathers, at most, for its last one to run here (its calls
 * claimed), then for their answers: a fast target's calls come back before the next batch
 * starts; a slow target's hold the next batch back this much and no more.
 */
const GATHER_UNTIL_CLAIMED_MS = 100;
const GATHER_UNTIL_ANSWERED_MS = 50;

/** A project's group of calls, as `grouped` runs it. */
interface Group {
  project: string;
  handed: Handed[];
  answerNow: (answers: Started[]) => void;
  behind: Behind<Handed>;
}

/**
 * Starts a group's batch. Several calls are told of their start at once, so their callers'
 * answers need not wait for the batch to run out; the batch then stays in flight, its answers
 * and then its callers' next calls gathering behind it (`lingerMs`), so that 32 callers make one
 * batch a turn rather than two that alternate: a workflow a turn is most of a sync call's cost.
 * A lone call is not told early: the next call of its project, gathering behind it, would then
 * find nothing in flight and go alone too (core/grouped.ts `finishingAlone`).
 */
async function startBatch(
  options: SyncCallsOptions,
  { project, handed, answerNow, behind }: Group,
): Promise<Started[]> {
  const [first] = handed;
  if (!first) return [];
  const workflowId = `batch-${syncWorkflowId(first.call)}`;
  const eager = await options.start({
    workflowId,
    project,
    calls: handed.map(({ call }) => call),
    trace: first.trace,
  });
  let closed: Promise<unknown> | undefined;
  const started = { eager, closed: () => (closed ??= options.closed(workflowId)) };
  const answers = handed.map(() => started);
  if (handed.length > 1) answerNow(answers);
  if (eager) {
    await settledWithin(first.claimed, GATHER_UNTIL_CLAIMED_MS);
    await settledWithin(Promise.all(handed.map((h) => h.answered)), GATHER_UNTIL_ANSWERED_MS);
    if (handed.length > 1) await lingerFor(handed.length, behind, options.lingerMs);
  }
  return answers;
}

async function answer(
  req: IncomingMessage,
  options: SyncCallsOptions,
  tokenHash: Uint8Array,
  joinBatch: (project: string, handed: Handed) => Promise<Started>,
): Promise<SyncOutcome> {
  if (req.method !== "POST") throw new RelayError("method_not_allowed", "POST only");
  const presented = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  if (!presented || !timingSafeEqual(sha256(presented), tokenHash)) {
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
  const call = checked.data as unknown as SyncInput;
  const release = options.slots.take(call.project);
  if (!release) throw new RelayError("unavailable", "this worker has its share of sync calls");
  const trace = Object.fromEntries(
    TRACE_HEADERS.flatMap((name) => {
      const value = req.headers[name];
      return typeof value === "string" ? [[name, value]] : [];
    }),
  );
  // The call's attempt continues its edge's hand-over span, whichever call's batch it is in.
  const expected = options.answers.expect(syncWorkflowId(call), callerTrace(new Headers(trace)));
  try {
    const started = await joinBatch(call.project, {
      call,
      claimed: expected.claimed,
      answered: expected.answer,
      bytes: body.byteLength,
      trace,
    });
    options.observeStart(started.eager);
    return await withBudget(
      answerHere(expected, started, options.logError),
      syncBudgetSeconds(call.target),
    );
  } finally {
    expected.withdraw();
    release();
  }
}

/**
 * How long an eager batch's calls wait on this worker's activity alone: past it, the batch's
 * close is watched too, since a first task handed back may run elsewhere (Core turned it down,
 * or it failed and was retried there). One long poll per slow batch, none for the rest; a batch
 * that did not start eagerly is watched at once.
 */
const CLOSE_WATCH_AFTER_MS = 1000;

/**
 * The call's answer from this worker's activity; or, once its batch closed without claiming it,
 * 503: it was not made and never will be here, so the edge makes it through Temporal.
 */
async function answerHere(
  expected: { answer: Promise<AnswerHere>; withdraw(): boolean },
  started: Started,
  logError: SyncCallsOptions["logError"],
): Promise<SyncOutcome> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const notMadeHere = new Promise<never>((_, reject) => {
    const watch = () =>
      started
        .closed()
        .catch(() => {}) // its close unknown (Temporal did not answer): as good as closed
        .then(() => {
          if (expected.withdraw()) {
            reject(new RelayError("unavailable", "the call's batch did not make it here"));
          }
        });
    timer = setTimeout(watch, started.eager ? CLOSE_WATCH_AFTER_MS : 0);
  });
  try {
    const answered = await Promise.race([expected.answer, notMadeHere]);
    if ("outcome" in answered) return answered.outcome;
    logError({ err: answered.failed }, "a sync call failed on this worker");
    throw new RelayError("target_timeout", "the sync target did not answer in time");
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

/**
 * Waits while calls keep gathering behind a batch, each within `lingerMs` of the last and
 * `2 * lingerMs` in all, until as many are in play as the batch carried and had behind it (its
 * callers' next calls, and those there already), at most a batch: a full one runs at once.
 */
async function lingerFor(carried: number, behind: Behind<Handed>, lingerMs: number) {
  const wanted = Math.min(SYNC_BATCH_MAX_CALLS, carried + behind.items().length);
  const until = performance.now() + 2 * lingerMs;
  let gathered = behind.items().length;
  while (gathered < wanted) {
    const left = Math.min(lingerMs, until - performance.now());
    if (left <= 0) return;
    await behind.until(gathered + 1, left);
    const now = behind.items().length;
    if (now <= gathered) return; // none came in time, or the gathered ones ran
    gathered = now;
  }
}

/** Once `promise` settled, or `ms` passed. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const passed = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([promise, passed]);
  clearTimeout(timer);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/**
 * Starts a batch's workflow on this worker's connection, as the edge starts a call's through the
 * HTTP API, with eager start asked: Temporal answers with the workflow's first task when this
 * worker has a slot free for it. True when it did.
 */
export function eagerSyncStarter(
  connection: NativeConnection,
  namespace: string,
  cipher: PayloadCipher,
): SyncCallsOptions["start"] {
  return async ({ workflowId, project, calls, trace }) => {
    const [sealed] = await cipher.encode([jsonPayload(calls)]);
    const budgetSeconds = Math.max(...calls.map((call) => syncBudgetSeconds(call.target)));
    const indexed = batchSearchAttributes({ project, requests: calls });
    const response = await connection.workflowService
      .startWorkflowExecution({
        namespace,
        identity: `${process.pid}@relay-worker`,
        requestId: workflowId,
        workflowId,
        workflowType: { name: SYNC_BATCH_WORKFLOW },
        taskQueue: { name: SYNC_TASK_QUEUE },
        input: { payloads: sealed ? [sealed] : [] },
        workflowExecutionTimeout: msToTs(budgetSeconds * 1000),
        searchAttributes: {
          indexedFields: Object.fromEntries(
            Object.entries(indexed).map(([name, value]) => [name, jsonPayload(value)]),
          ),
        },
        ...(Object.keys(trace).length > 0 && {
          header: { fields: { [TRACE_HEADER]: jsonPayload(trace) } },
        }),
        priority: fairnessOf(project),
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

/** Settles once the workflow `workflowId` has closed, however it ended. */
export const closedOf =
  (client: Client): SyncCallsOptions["closed"] =>
  (workflowId) =>
    client.workflow.getHandle(workflowId).result();
