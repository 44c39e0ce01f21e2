/** Names shared by whoever starts Temporal workflows (edge, control plane) and the worker. */
import type { RequestStatus } from "./model.ts";

export const TASK_QUEUE = "relay";
/**
 * Sync calls and notifications run on task queues of their own, each polled by a worker of its
 * own slots in the worker process: async deliveries, however many wait, never delay a sync
 * caller, and a notification URL that hangs delays neither.
 */
export const SYNC_TASK_QUEUE = "relay-sync";
export const NOTIFICATION_TASK_QUEUE = "relay-notifications";
/** Background jobs (a recovery job's workflow): behind no delivery, notification or callback. */
export const JOB_TASK_QUEUE = "relay-jobs";

/**
 * Temporal's task queue fairness key: a project's tasks are dispatched in turn with other
 * projects' rather than behind all of its own backlog (where the server has fairness on).
 */
export const fairnessOf = (project: string) => ({ fairnessKey: project });

export const DELIVERY_WORKFLOW = "deliverRequest";
/** Under load, one project's immediate async calls together (edge/batcher.ts). */
export const BATCH_WORKFLOW = "deliverBatch";
export const SYNC_WORKFLOW = "relaySync";
/** Sync calls a worker gathered; made by that worker alone (workflows/sync-calls.ts). */
export const SYNC_BATCH_WORKFLOW = "relaySyncBatch";

/** The daily key auto-rotation: a Schedule, visible with its runs in the Temporal UI. */
export const ROTATION_WORKFLOW = "rotateKeys";
export const ROTATION_SCHEDULE_ID = "relay-key-rotation";

/** The daily request-log retention: finished requests past it leave the log with their bodies. */
export const RETENTION_WORKFLOW = "pruneRequestLog";
export const RETENTION_SCHEDULE_ID = "relay-log-retention";

/**
 * A recovery job (core/recoveries.ts): its workflow runs on the worker, its steps on the control
 * plane's task queue, where replays are started.
 */
export const RECOVERY_WORKFLOW = "recoverRequests";
export const CONTROL_TASK_QUEUE = "relay-control";

/**
 * A schedule's fire (core/schedules.ts): Temporal's Schedule of the schedule's id starts it on
 * the jobs' queue; its one activity, the call to the edge, runs on the control plane's.
 */
export const SCHEDULE_FIRE_WORKFLOW = "fireSchedule";

/** One per target while its deliveries wait: probes an open circuit, lets waiting ones go. */
export const CIRCUIT_WORKFLOW = "targetCircuit";
export const circuitWorkflowId = (targetId: string) => `circuit-${targetId}`;
/** Tells a target's circuit workflow that a member changed it (resumed, enabled). */
export const CIRCUIT_CHANGED_SIGNAL = "changed";
/** Tells a batch that one of the requests it holds is to go on as its own workflow (a cancel). */
export const HAND_ON_SIGNAL = "handOn";

/**
 * The workflow header a trace rides in: Temporal's OpenTelemetry interceptors' name for it
 * (`TRACE_HEADER` of @temporalio/interceptors-opentelemetry), a JSON payload of the
 * `traceparent` carrier. The edge writes it, Relay's workflow interceptor reads it.
 */
export const TRACE_HEADER = "_tracer-data";

/** Custom search attributes the delivery workflow sets; registered when Temporal starts. */
export const searchAttributes = {
  project: "RelayProject",
  line: "RelayLine",
  endpoint: "RelayEndpoint",
  status: "RelayStatus",
  /** A batch's request ids: how the Temporal UI finds the batch of a request (`RelayRequestIds="req_..."`). */
  requestIds: "RelayRequestIds",
} as const;

/** Each search attribute's Temporal type: keywords, but for the list of a batch's request ids. */
export const searchAttributeType = (name: string): "Keyword" | "KeywordList" =>
  name === searchAttributes.requestIds ? "KeywordList" : "Keyword";

/**
 * A batch's search attributes: its project and the ids of its requests, so any of them finds it
 * (Temporal limits a value to 2 KB by default: 64 ids of 26 characters fit).
 */
export function batchSearchAttributes(batch: {
  project: string;
  requests: readonly { requestId: string }[];
}): Record<string, string | string[]> {
  return {
    [searchAttributes.project]: batch.project,
    [searchAttributes.requestIds]: batch.requests.map((request) => request.requestId),
  };
}

/** The search attributes a request's delivery workflow starts with: where it came in, and its status. */
export function requestSearchAttributes(
  request: { project: string; line: string; endpoint: string },
  status: RequestStatus,
): Record<string, string> {
  return {
    [searchAttributes.project]: request.project,
    [searchAttributes.line]: request.line,
    [searchAttributes.endpoint]: request.endpoint,
    [searchAttributes.status]: status,
  };
}

/**
 * The same attributes as the Temporal SDK client's `searchAttributes` takes them: a list of
 * values per name (the control plane's replays start through the SDK, the edge through HTTP).
 */
export function requestSearchAttributeLists(
  request: { project: string; line: string; endpoint: string },
  status: RequestStatus,
): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(requestSearchAttributes(request, status)).map(([name, value]) => [
      name,
      [value],
    ]),
  );
}
