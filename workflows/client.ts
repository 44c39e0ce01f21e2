/** The Temporal client the worker and the control plane share, and the rotation schedule. */
import {
  Client,
  Connection,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
} from "@temporalio/client";
import { ROTATION_SCHEDULE_ID, ROTATION_WORKFLOW, TASK_QUEUE } from "../core/temporal.ts";

export interface TemporalSettings {
  TEMPORAL_ADDRESS: string;
  TEMPORAL_NAMESPACE: string;
  TEMPORAL_API_KEY?: string | undefined;
}

export async function connectTemporal(settings: TemporalSettings): Promise<Client> {
  const connection = await Connection.connect({
    address: settings.TEMPORAL_ADDRESS,
    ...(settings.TEMPORAL_API_KEY && { apiKey: settings.TEMPORAL_API_KEY, tls: true }),
  });
  return new Client({ connection, namespace: settings.TEMPORAL_NAMESPACE });
}

/** Creates the daily rotation Schedule unless it exists; operators see it in the Temporal UI. */
export async function ensureRotationSchedule(client: Client): Promise<void> {
  await client.schedule
    .create({
      scheduleId: ROTATION_SCHEDULE_ID,
      spec: { intervals: [{ every: "1 day" }] },
      action: { type: "startWorkflow", workflowType: ROTATION_WORKFLOW, taskQueue: TASK_QUEUE },
      // A run that is late or still going is not doubled; the run is idempotent anyway.
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: "1 day" },
    })
    .catch((error: unknown) => {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    });
}

/** One rotation run now, through Temporal like the scheduled ones; resolves with its count. */
export async function runRotationNow(client: Client): Promise<number> {
  return client.workflow.execute<() => Promise<number>>(ROTATION_WORKFLOW, {
    taskQueue: TASK_QUEUE,
    workflowId: `${ROTATION_SCHEDULE_ID}-manual-${Date.now()}`,
  });
}
