/**
 * sendCallback: one target's completion callback in one run (core/callbacks.ts), a workflow of its
 * own (workflow id `callback.{run}.{target}`, so it is sent once however often it is raised) whose
 * activity is retried for a day as a delivery is. Started apart from the workflow whose target's
 * delivery ended, on the notifications' task queue, so a caller's callback URL that is down holds
 * neither a request nor a delivery slot.
 */
import { WorkflowExecutionAlreadyStartedError } from "@temporalio/common";
import { ParentClosePolicy, proxyActivities, startChild } from "@temporalio/workflow";
import type { CallbackJob } from "../core/callbacks.ts";
import type { DeliveryInput } from "../core/delivery.ts";
import { fairnessOf, NOTIFICATION_TASK_QUEUE } from "../core/temporal.ts";
import type { Activities } from "./activities.ts";
import { projectKey } from "./status.ts";

const { callBack } = proxyActivities<Activities>({
  startToCloseTimeout: "30 seconds",
  scheduleToCloseTimeout: "24 hours",
  retry: { maximumInterval: "1 hour" },
});

export async function sendCallback(job: CallbackJob): Promise<string> {
  return callBack(job);
}

/**
 * Calls back for these async targets of a run (the call's, or a replay's), each as its delivery
 * ends, when the caller asked. A target's callback is started once per run whoever raises it (a
 * batch, then the request's own workflow); a cancelled run's targets not ended yet do not call back.
 */
export async function callBackEnds(input: DeliveryInput, targetIds: string[]): Promise<void> {
  const { callbacks } = input;
  if (!callbacks) return;
  const replay = input.replay ?? 0;
  const run = replay ? `${input.requestId}-replay-${replay}` : input.requestId;
  await Promise.all(
    targetIds.map((targetId) =>
      startChild(sendCallback, {
        workflowId: `callback.${run}.${targetId}`,
        args: [{ project: input.project, requestId: input.requestId, replay, targetId, callbacks }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        taskQueue: NOTIFICATION_TASK_QUEUE,
        priority: fairnessOf(input.project),
        // Found with the project's other workflows (deleted with it).
        typedSearchAttributes: [{ key: projectKey, value: input.project }],
      }).catch((error: unknown) => {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }),
    ),
  );
}
