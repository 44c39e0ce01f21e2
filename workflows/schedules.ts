/**
 * fireSchedule: one fire of a schedule (core/schedules.ts), started by its Temporal Schedule with
 * the fire's time in its workflow id. The call itself is the control plane's (its task queue):
 * the workflow id is the fire's, so every try of it is the same call to the edge.
 */
import { proxyActivities, workflowInfo } from "@temporalio/workflow";
import type { ScheduleActivities } from "../core/schedules.ts";
import { CONTROL_TASK_QUEUE } from "../core/temporal.ts";

const { sendScheduledCall } = proxyActivities<ScheduleActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  // A sync target may take 90 s to answer; a call lost with its control plane stops beating.
  startToCloseTimeout: "2 minutes",
  heartbeatTimeout: "10 seconds",
  // Tried through an edge or control plane that is down for a while; a fire later than that
  // is one the caller no longer expects.
  scheduleToCloseTimeout: "10 minutes",
  retry: { initialInterval: "1 second", maximumInterval: "30 seconds" },
});

export async function fireSchedule(scheduleId: string): Promise<number | "gone"> {
  return sendScheduledCall({ scheduleId, fireId: workflowInfo().workflowId });
}
