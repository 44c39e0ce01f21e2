/**
 * Starts Relay's workflows through Temporal's HTTP API with plain `fetch`, so the edge runs on
 * any web-standard runtime (grpc-js under Deno's Node layer is not reliable), and waits for a
 * sync workflow's result by long-polling its close event. Those long polls hold a connection
 * each for as long as the target takes, so they go through a fetch of their own (another pool)
 * and each project may have only so many at once on an edge: however slow one tenant's sync
 * target, every other call still gets a connection for its start. Starts for callers go through
 * the edge's admission (./admission.ts): past its slots and wait, or when Temporal itself
 * throttles (429), the caller gets 503 with Retry-After at once rather than a growing queue.
 * Inputs go sealed by the payload codec, as the worker's do, and what the edge reads back of a
 * history it opens: payloads travel in protobuf's JSON form (`noPayloadShorthand`).
 */
import {
  type Accepted,
  acceptedStatus,
  type DeliveryBatch,
  type DeliveryInput,
  type SyncInput,
  type SyncOutcome,
  syncBudgetSeconds,
  syncWorkflowId,
} from "../core/delivery.ts";
import { notQueued, RelayError } from "../core/errors.ts";
import { keyReused } from "../core/idempotency.ts";
import {
  jsonPayload,
  jsonPayloadValue,
  type PayloadCipher,
  type PayloadJson,
  payloadFromJson,
  payloadToJson,
} from "../core/payload-codec.ts";
import {
  BATCH_WORKFLOW,
  batchSearchAttributes,
  DELIVERY_WORKFLOW,
  fairnessOf,
  requestSearchAttributes,
  SYNC_TASK_QUEUE,
  SYNC_WORKFLOW,
  TASK_QUEUE,
  TRACE_HEADER,
} from "../core/temporal.ts";
import {
  endingSpan,
  spanAttribute,
  startClientSpan,
  type TraceContext,
  traceHeaders,
} from "../core/tracing.ts";
import { StartAdmission } from "./admission.ts";
import type { HandOver } from "./worker-sync.ts";

/**
 * `bodyTag` marks a call with an Idempotency-Key: its workflow id repeats with the key, and a
 * repeat with the same body (tag) is deduplicated while one with another body is refused (422).
 */
export interface WorkflowStarter {
  /** Resolves when Temporal answers; for readiness. */
  ready(): Promise<void>;
  /**
   * `trace`: the span the start's own span is a child of; the workflow's continues it. Answers
   * what the caller is told (a repeat's: what the first call was told).
   */
  startDelivery(input: DeliveryInput, trace: TraceContext, bodyTag?: string): Promise<Accepted>;
  /**
   * One of the project's sync slots on this edge, held until `release`; null when all are
   * taken. Taken before anything is queued, so a refused call queues none of its targets.
   */
  claimSync(project: string): { release(): void } | null;
  /** Runs the sync workflow and answers its outcome (a repeat's: the first one's). */
  runSync(
    input: SyncInput,
    signal: AbortSignal,
    trace: TraceContext,
    bodyTag?: string,
  ): Promise<SyncOutcome>;
}

/** A workflow's start, ready to send: what the control plane keeps while it is made. */
export interface PreparedStart {
  workflowId: string;
  /** Temporal's HTTP API start request (JSON). */
  body: Uint8Array;
  /** Makes the start; rejects as a start fails (unavailable, saturated). */
  send(): Promise<void>;
}

/** Starts a project's immediate async calls together (./batcher.ts). */
export interface BatchStarter {
  /** One of the edge's start slots for `project`, held until called; 503 when none is free. */
  admit(project: string): Promise<() => void>;
  /**
   * The start of `requests`: a lone one's own workflow, or one batch workflow for several.
   * `trace`: the span the start's own span is a child of (the first request's).
   */
  prepareStart(
    project: string,
    requests: DeliveryInput[],
    trace: TraceContext,
  ): Promise<PreparedStart>;
}

export interface TemporalHttpOptions {
  baseUrl: string;
  namespace: string;
  apiKey?: string | undefined;
  /** Seals each workflow's input and opens what is read back (core/payload-codec.ts). */
  cipher: PayloadCipher;
  fetch: typeof fetch;
  /** For the long polls on sync results: a pool apart from `fetch`'s (Node), or the same. */
  syncWaitFetch: typeof fetch;
  /** Hands a sync call to a worker first, when one is configured (./worker-sync.ts). */
  handOver?: HandOver | undefined;
  /** Sync calls one project may have in flight on this edge. */
  maxSyncPerProject: number;
  /** Starts for callers in flight on this edge at once (RELAY_TEMPORAL_MAX_STARTS). */
  maxStartsInFlight: number;
  /** How long a caller's start may wait for one of those (RELAY_TEMPORAL_START_WAIT_MS). */
  maxStartWaitMs: number;
  /**
   * How long a start, or a repeat's read of its first call, may wait for Temporal's answer
   * (RELAY_TEMPORAL_START_TIMEOUT_MS).
   */
  startTimeoutMs: number;
  /** Where calls Temporal failed go (a structured logger's `error`). */
  logError?: (fields: Record<string, unknown>, message: string) => void;
  /** Told how long each start took, by workflow type (a metric). */
  onStart?: (workflowType: string, seconds: number) => void;
}

interface StartedEvent {
  workflowExecutionStartedEventAttributes?: { input?: { payloads?: PayloadJson[] } };
}

interface CloseEvent {
  eventType?: string;
  workflowExecutionCompletedEventAttributes?: { result?: { payloads?: PayloadJson[] } };
}

/** What the edge starts a workflow with: a request's delivery, a sync call, or a batch. */
type Started = DeliveryInput | SyncInput | DeliveryBatch;

/** A plain JSON value as a payload in protobuf's JSON form (search attributes, headers). */
const plainPayload = (value: unknown) => payloadToJson(jsonPayload(value));

export function temporalHttpStarter(options: TemporalHttpOptions): WorkflowStarter & BatchStarter {
  const namespaceUrl = `${options.baseUrl}/api/v1/namespaces/${encodeURIComponent(options.namespace)}`;
  const workflows = `${namespaceUrl}/workflows`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  const syncInFlight = new Map<string, number>();
  const { cipher } = options;
  /** The first payload of a history's `payloads`, opened; undefined when there is none. */
  async function opened<T>(payloads: PayloadJson[] | undefined): Promise<T | undefined> {
    const [first] = payloads ?? [];
    if (!first) return undefined;
    const [payload] = await cipher.decode([payloadFromJson(first)]);
    return jsonPayloadValue(payload) as T | undefined;
  }
  const admission = new StartAdmission(options.maxStartsInFlight, options.maxStartWaitMs);
  const saturated = () =>
    new RelayError("unavailable", "too many requests are being queued; retry");
  /** Temporal did not take a call: logged with its answer, and the caller gets 503. */
  async function unavailable(call: string, answer: Response | Error): Promise<RelayError> {
    const why =
      answer instanceof Error
        ? // fetch's own message says only "fetch failed"; its cause says why.
          `${answer.name}: ${answer.message}${answer.cause ? ` (${String(answer.cause)})` : ""}`
        : `${answer.status} ${(await answer.text().catch(() => "")).slice(0, 300)}`;
    options.logError?.({ call, why }, "Temporal's HTTP API failed a call");
    return notQueued();
  }

  /**
   * One start, ready to send, in a span of its own (as Temporal's client interceptor makes it),
   * which the workflow's span is then a child of; the span ends when the start is answered.
   */
  async function prepare(
    workflowId: string,
    workflowType: string,
    input: Started,
    trace: TraceContext,
    extra: Record<string, unknown> = {},
    bodyTag?: string,
  ): Promise<PreparedStart> {
    const span = startClientSpan(`StartWorkflow:${workflowType}`, trace, {
      [spanAttribute.workflowId]: workflowId,
    });
    const tracing = traceHeaders(span.context);
    const sealed = await cipher.encode([jsonPayload(input)]);
    const body = JSON.stringify({
      workflowType: { name: workflowType },
      taskQueue: { name: workflowType === SYNC_WORKFLOW ? SYNC_TASK_QUEUE : TASK_QUEUE },
      priority: fairnessOf(input.project),
      // Temporal deduplicates starts by requestId, so retrying this call is safe; with an
      // Idempotency-Key, a repeat with the same body is such a retry.
      requestId: bodyTag ? `${workflowId}.${bodyTag}` : workflowId,
      ...(bodyTag && {
        workflowIdConflictPolicy: "WORKFLOW_ID_CONFLICT_POLICY_FAIL",
        workflowIdReusePolicy: "WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE",
      }),
      input: { payloads: sealed.map(payloadToJson) },
      // Plain: where a request came in and its status, nothing secret.
      searchAttributes: {
        indexedFields: Object.fromEntries(
          Object.entries(
            "requests" in input
              ? batchSearchAttributes(input)
              : requestSearchAttributes(input, acceptedStatus(input)),
          ).map(([name, value]) => [name, plainPayload(value)]),
        ),
      },
      ...(Object.keys(tracing).length > 0 && {
        header: { fields: { [TRACE_HEADER]: plainPayload(tracing) } },
      }),
      ...extra,
    });
    return {
      workflowId,
      body: new TextEncoder().encode(body),
      send: () => endingSpan(span.span, () => send(workflowId, workflowType, body, bodyTag)),
    };
  }

  async function send(
    workflowId: string,
    workflowType: string,
    body: string,
    bodyTag: string | undefined,
  ): Promise<void> {
    const started = performance.now();
    // One deadline for both tries: a Temporal that does not answer is given up on, once.
    const signal = AbortSignal.timeout(options.startTimeoutMs);
    const post = () =>
      options.fetch(`${workflows}/${encodeURIComponent(workflowId)}?noPayloadShorthand`, {
        method: "POST",
        headers,
        body,
        signal,
      });
    // A pooled connection the server had just closed fails before any answer (after a restart
    // of Temporal, or its idle timeout): one more try, on a fresh connection, is safe, since
    // Temporal deduplicates the start by its requestId.
    const response = await post()
      .catch(post)
      .catch((error: unknown) => error as Error);
    options.onStart?.(workflowType, (performance.now() - started) / 1000);
    if (response instanceof Error || !response.ok) {
      if (bodyTag && !(response instanceof Error) && response.status === 409) {
        await response.body?.cancel();
        throw keyReused();
      }
      // Temporal's RESOURCE_EXHAUSTED: saturation, like a refusal of our own admission.
      if (!(response instanceof Error) && response.status === 429) {
        await response.body?.cancel();
        throw saturated();
      }
      throw await unavailable(`start ${workflowType}`, response);
    }
    await response.body?.cancel();
  }

  /** One start, prepared and sent. */
  async function start(...args: Parameters<typeof prepare>): Promise<void> {
    await (await prepare(...args)).send();
  }

  /**
   * What the first call with this Idempotency-Key was told, from its workflow's input (its
   * first history event): a repeat may carry another delay, or none, and Temporal took the
   * start as the first one's. One more call to Temporal, for calls with an Idempotency-Key only.
   */
  async function firstAnswer(workflowId: string): Promise<Accepted> {
    const response = await options
      .fetch(
        `${workflows}/${encodeURIComponent(workflowId)}/history?maximumPageSize=1&noPayloadShorthand`,
        { headers, signal: AbortSignal.timeout(options.startTimeoutMs) },
      )
      .catch((error: unknown) => error as Error);
    if (response instanceof Error || !response.ok) {
      throw await unavailable("read the first call of an Idempotency-Key", response);
    }
    const page = (await response.json()) as { history?: { events?: StartedEvent[] } };
    const first = await opened<Pick<DeliveryInput, "notBefore">>(
      page.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads,
    );
    return acceptedStatus(first ?? {});
  }

  /** One of the edge's start slots for `project`; refused when none came in time. */
  async function admit(project: string): Promise<() => void> {
    const release = await admission.acquire(project);
    if (!release) throw saturated();
    return release;
  }

  /** `start` once the edge's admission gives it a slot. */
  async function admitted(project: string, run: () => Promise<void>): Promise<void> {
    const release = await admit(project);
    try {
      await run();
    } finally {
      release();
    }
  }

  return {
    /** Temporal's HTTP API answers: the namespace can be read. */
    async ready() {
      const response = await options.fetch(namespaceUrl, { headers });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`Temporal's HTTP API answered ${response.status}`);
    },
    claimSync(project) {
      const held = syncInFlight.get(project) ?? 0;
      if (held >= options.maxSyncPerProject) return null;
      syncInFlight.set(project, held + 1);
      return {
        release() {
          const left = (syncInFlight.get(project) ?? 1) - 1;
          if (left === 0) syncInFlight.delete(project);
          else syncInFlight.set(project, left);
        },
      };
    },
    async startDelivery(input, trace, bodyTag) {
      await admitted(input.project, async () => {
        await start(input.requestId, DELIVERY_WORKFLOW, input, trace, {}, bodyTag);
      });
      return bodyTag ? firstAnswer(input.requestId) : acceptedStatus(input);
    },

    admit,
    prepareStart(project, requests, trace) {
      const [first, ...others] = requests;
      if (!first) throw new Error("a start needs a request");
      return others.length === 0
        ? prepare(first.requestId, DELIVERY_WORKFLOW, first, trace)
        : prepare(`batch-${first.requestId}`, BATCH_WORKFLOW, { project, requests }, trace);
    },

    async runSync(input, signal, trace, bodyTag) {
      // A call with an Idempotency-Key keeps this path: Temporal's start tells its repeats apart.
      const handedOver = !bodyTag && (await options.handOver?.(input, signal, trace));
      if (handedOver) return handedOver;
      const workflowId = syncWorkflowId(input);
      const budget = syncBudgetSeconds(input.target);
      await admitted(input.project, () =>
        start(
          workflowId,
          SYNC_WORKFLOW,
          input,
          trace,
          { workflowExecutionTimeout: `${budget}s` },
          bodyTag,
        ),
      );
      const closed = `${workflows}/${encodeURIComponent(workflowId)}/history?waitNewEvent=true&historyEventFilterType=HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT&noPayloadShorthand`;
      const deadline = Date.now() + budget * 1000;
      while (Date.now() < deadline) {
        const response = await options
          .syncWaitFetch(closed, { headers, signal })
          .catch((error: unknown) => error as Error);
        // A caller that hung up is no failure of Temporal's: nothing to log.
        if (signal.aborted) throw new RelayError("unavailable", "the caller left");
        if (response instanceof Error || !response.ok) {
          throw await unavailable("wait for a sync result", response);
        }
        const page = (await response.json()) as { history?: { events?: CloseEvent[] } };
        const event = page.history?.events?.[0];
        if (!event) continue; // the long poll timed out before the workflow closed
        const result = await opened<SyncOutcome>(
          event.workflowExecutionCompletedEventAttributes?.result?.payloads,
        );
        if (event.eventType !== "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" || !result) {
          throw new RelayError("target_timeout", "the sync target did not answer in time");
        }
        return result;
      }
      throw new RelayError("target_timeout", "the sync target did not answer in time");
    },
  };
}
