/**
 * sendNotification: one per operational event (workflow id = the event's id, so an event is
 * sent once however often it is raised), started apart from the workflow that raised it, so a
 * notification URL that is down delays neither a request nor a circuit.
 */
import { WorkflowExecutionAlreadyStartedError } from "@temporalio/common";
import {
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  startChild,
} from "@temporalio/workflow";
import type { DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import type { NotificationEvent } from "../core/notifications.ts";
import { fairnessOf, NOTIFICATION_TASK_QUEUE } from "../core/temporal.ts";
import type { Activities } from "./activities.ts";
import { projectKey } from "./status.ts";

/** Retried for a day, at most an hour apart, as a delivery is; then given up. */
const { notify } = proxyActivities<Activities>({
  startToCloseTimeout: "30 seconds",
  scheduleToCloseTimeout: "24 hours",
  retry: { maximumInterval: "1 hour" },
});

export async function sendNotification(event: NotificationEvent): Promise<string> {
  return notify(event);
}

const { projectNotifies } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "10 seconds",
  retry: { maximumInterval: "1 minute" },
});

/** Notifications raised before they had a task queue of their own replay on the deliveries'. */
const OWN_QUEUE = "notifications-own-queue";
/** Workflows begun before raised every event, its project's notification URL set or not. */
const ONLY_WITH_A_URL = "notify-only-with-a-url";

/**
 * Raises `event`: its notification goes out on its own, after the raising workflow ends too. A
 * project with no notification URL raises nothing: a target down for a day fails every request
 * sent to it, and each raised was a workflow that found no URL.
 */
export async function raise(event: NotificationEvent): Promise<void> {
  if (patched(ONLY_WITH_A_URL) && !(await projectNotifies(event.project))) return;
  await startChild(sendNotification, {
    workflowId: event.id,
    args: [event],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    // Found with the project's other workflows (deleted with it).
    typedSearchAttributes: [{ key: projectKey, value: event.project }],
    ...(patched(OWN_QUEUE) && {
      taskQueue: NOTIFICATION_TASK_QUEUE,
      priority: fairnessOf(event.project),
    }),
  }).catch((error: unknown) => {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  });
}

/** The failure queue's newcomer, told to the project: once per `key` (a request, a replay). */
export function requestFailed(
  input: DeliveryInput,
  status: RequestStatus,
  key: string,
): NotificationEvent {
  return {
    id: `request.failed.${key}`,
    type: "request.failed",
    project: input.project,
    at: new Date().toISOString(),
    data: {
      requestId: input.requestId,
      line: input.line,
      endpoint: input.endpoint,
      status,
      targets: input.targets.map((t) => ({ id: t.id, name: t.name })),
    },
  };
}
