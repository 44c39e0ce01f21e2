/**
 * Sync calls handed to a worker (RELAY_WORKER_URL; workflows/sync-calls.ts): the worker gathers
 * a project's calls that arrive together into one workflow it starts with eager start, and
 * answers each as soon as it is logged and charged, two trips through Temporal fewer than a
 * start here and a long poll for the workflow's close, and one workflow for several calls. Only
 * an accelerator: where the worker does not answer the call (it refused it, was busy, or died),
 * the edge starts the call's own workflow through Temporal's HTTP API (./temporal.ts). A worker
 * answers 503 only for a call it never made; one that died mid-call may have made it, so the
 * target may see it again, as an async delivery may (at least once).
 */
import {
  SYNC_CALLS_PATH,
  type SyncInput,
  type SyncOutcome,
  syncWorkflowId,
} from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { SYNC_WORKFLOW } from "../core/temporal.ts";
import {
  endingSpan,
  spanAttribute,
  startClientSpan,
  type TraceContext,
  traceHeaders,
} from "../core/tracing.ts";

/** The call's outcome, or undefined when the worker did not take it (start it through Temporal). */
export type HandOver = (
  input: SyncInput,
  signal: AbortSignal,
  trace: TraceContext,
) => Promise<SyncOutcome | undefined>;

export interface WorkerSyncOptions {
  /** The worker's listener (RELAY_WORKER_URL). */
  url: string;
  edgeToken: string;
  /** Holds a connection for as long as the target takes: a pool apart from the starts'. */
  fetch: typeof fetch;
  logError?: (fields: Record<string, unknown>, message: string) => void;
}

export function workerSyncCalls(options: WorkerSyncOptions): HandOver {
  const endpoint = new URL(SYNC_CALLS_PATH, options.url).href;
  /**
   * In the span a start through Temporal would have (./temporal.ts), which the workflow's span
   * is then a child of; it ends as the worker answers.
   */
  return async (input, signal, trace) => {
    const span = startClientSpan(`StartWorkflow:${SYNC_WORKFLOW}`, trace, {
      [spanAttribute.workflowId]: syncWorkflowId(input),
    });
    return endingSpan(
      span.span,
      () => call(input, signal, span.context),
      (outcome) => (outcome ? undefined : "the worker did not take the call"),
    );
  };

  async function call(
    input: SyncInput,
    signal: AbortSignal,
    trace: TraceContext,
  ): Promise<SyncOutcome | undefined> {
    const response = await options
      .fetch(endpoint, {
        method: "POST",
        headers: {
          authorization: `Bearer ${options.edgeToken}`,
          "content-type": "application/json",
          ...traceHeaders(trace),
        },
        body: JSON.stringify(input),
        signal,
      })
      .catch((error: unknown) => error as Error);
    if (signal.aborted) throw new RelayError("unavailable", "the caller left");
    if (!(response instanceof Error) && response.status === 200) {
      return (await response.json()) as SyncOutcome;
    }
    if (!(response instanceof Error)) await response.body?.cancel();
    // The worker's answer is final when the call's time ran out; a busy worker (503) is the
    // usual reason to go through Temporal instead, anything else is worth a line.
    if (!(response instanceof Error) && response.status === 504) {
      throw new RelayError("target_timeout", "the sync target did not answer in time");
    }
    if (response instanceof Error || response.status !== 503) {
      options.logError?.(
        {
          call: "hand a sync call to a worker",
          why: response instanceof Error ? response.message : response.status,
        },
        "the worker did not take a sync call; starting it through Temporal",
      );
    }
    return undefined;
  }
}
