/**
 * Starts Relay's workflows through Temporal's HTTP API with plain `fetch`, so the edge runs on
 * any web-standard runtime (grpc-js under Deno's Node layer is not reliable), and waits for a
 * sync workflow's result by long-polling its close event.
 */
import {
  answeringWorkflowId,
  type DeliveryInput,
  type StreamRecord,
  type SyncInput,
  type SyncOutcome,
} from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import {
  DELIVERY_WORKFLOW,
  STREAM_RECORD_WORKFLOW,
  SYNC_WORKFLOW,
  searchAttributes,
  TASK_QUEUE,
} from "../core/temporal.ts";

export interface WorkflowStarter {
  startDelivery(input: DeliveryInput): Promise<void>;
  /** Runs the sync workflow and answers its outcome. */
  runSync(input: SyncInput, signal: AbortSignal): Promise<SyncOutcome>;
  /** Hands a finished stream to the worker for the request log and billing. */
  recordStream(record: StreamRecord): Promise<void>;
}

export interface TemporalHttpOptions {
  baseUrl: string;
  namespace: string;
  apiKey?: string | undefined;
  fetch: typeof fetch;
}

/** Room beyond the target's own timeout for the workflow task around it. */
const SYNC_SLACK_SECONDS = 10;

interface CloseEvent {
  eventType?: string;
  workflowExecutionCompletedEventAttributes?: { result?: unknown[] };
}

export function temporalHttpStarter(options: TemporalHttpOptions): WorkflowStarter {
  const workflows = `${options.baseUrl}/api/v1/namespaces/${encodeURIComponent(options.namespace)}/workflows`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  const unavailable = () =>
    new RelayError("unavailable", "the request could not be queued; try again");

  async function start(
    workflowId: string,
    workflowType: string,
    input: DeliveryInput | SyncInput | StreamRecord,
    extra: Record<string, unknown> = {},
  ): Promise<void> {
    const response = await options
      .fetch(`${workflows}/${encodeURIComponent(workflowId)}`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          workflowType: { name: workflowType },
          taskQueue: { name: TASK_QUEUE },
          // Temporal deduplicates starts by requestId, so retrying this call is safe.
          requestId: workflowId,
          input: [input],
          searchAttributes: {
            indexedFields: {
              [searchAttributes.project]: input.project,
              [searchAttributes.line]: input.line,
              [searchAttributes.endpoint]: input.endpoint,
              [searchAttributes.status]: "queued",
            },
          },
          ...extra,
        }),
      })
      .catch(() => null);
    await response?.body?.cancel();
    if (!response?.ok) throw unavailable();
  }

  return {
    startDelivery: (input) => start(input.requestId, DELIVERY_WORKFLOW, input),
    recordStream: (record) =>
      start(answeringWorkflowId(record, "stream"), STREAM_RECORD_WORKFLOW, record),

    async runSync(input, signal) {
      const workflowId = answeringWorkflowId(input, "sync");
      const budget = input.target.timeoutSeconds + SYNC_SLACK_SECONDS;
      await start(workflowId, SYNC_WORKFLOW, input, { workflowExecutionTimeout: `${budget}s` });
      const closed = `${workflows}/${encodeURIComponent(workflowId)}/history?waitNewEvent=true&historyEventFilterType=HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT`;
      const deadline = Date.now() + budget * 1000;
      while (Date.now() < deadline) {
        const response = await options.fetch(closed, { headers, signal }).catch(() => null);
        if (!response?.ok) {
          await response?.body?.cancel();
          throw unavailable();
        }
        const page = (await response.json()) as { history?: { events?: CloseEvent[] } };
        const event = page.history?.events?.[0];
        if (!event) continue; // the long poll timed out before the workflow closed
        const result = event.workflowExecutionCompletedEventAttributes?.result?.[0];
        if (event.eventType !== "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" || !result) {
          throw new RelayError("target_timeout", "the sync target did not answer in time");
        }
        return result as SyncOutcome;
      }
      throw new RelayError("target_timeout", "the sync target did not answer in time");
    },
  };
}
