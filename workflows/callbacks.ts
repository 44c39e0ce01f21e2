/**
 * sendCallbacks: a run's completion callbacks (core/callbacks.ts), one workflow per request and
 * run (workflow id `callback.{run}`, so they are sent once however often they are raised), each
 * target's callback an activity retried for a day as a delivery is. Started apart from the
 * workflow that ended the run, on the notifications' task queue, so a caller's callback URL that
 * is down holds neither a request nor a delivery slot.
 */
import { WorkflowExecutionAlreadyStartedError } from "@temporalio/common";
import { ParentClosePolicy, proxyActivities, startChild } from "@temporalio/workflow";
import type { CallbackJob } from "../core/callbacks.ts";
import type { DeliveryInput } from "../core/delivery.ts";
import { fairnessOf, NOTIFICATION_TASK_QUEUE } from "../core/temporal.ts";
import type { Activities } from "./activities.ts";
import { asyncDeliveries } from "./deliveries.ts";

const { callBack } = proxyActivities<Activities>({
  startToCloseTimeout: "30 seconds",
  scheduleToCloseTimeout: "24 hours",
  retry: { maximumInterval: "1 hour" },
});

export async function sendCallbacks(job: CallbackJob): Promise<string[]> {
  return Promise.all(job.targetIds.map((targetId) => callBack(job, targetId)));
}

/**
 * Calls back for each async target of a run that ended (the call's, or a replay's), when its
 * caller asked; a cancelled run does not call back.
 */
export async function callBackEnds(input: DeliveryInput): Promise<void> {
  if (!input.callbacks) return;
  const run = input.replay ? `${input.requestId}-replay-${input.replay}` : input.requestId;
  const job: CallbackJob = {
    project: input.project,
    requestId: input.requestId,
    replay: input.replay ?? 0,
    targetIds: asyncDeliveries(input).map((d) => d.target.id),
    callbacks: input.callbacks,
  };
  await startChild(sendCallbacks, {
    workflowId: `callback.${run}`,
    args: [job],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    taskQueue: NOTIFICATION_TASK_QUEUE,
    priority: fairnessOf(input.project),
  }).catch((error: unknown) => {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  });
}
