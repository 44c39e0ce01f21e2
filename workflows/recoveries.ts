/**
 * recoverRequests: a recovery job (core/recoveries.ts), workflow id the job's id. It only paces
 * its steps, which the control plane runs (its task queue: a replay is the control plane's to
 * start) and which keep the job's whole state in Postgres, so the workflow's own is its id.
 */
import { continueAsNew, proxyActivities, sleep, workflowInfo } from "@temporalio/workflow";
import { RECOVERY_STEP_MS, type RecoveryActivities } from "../core/recoveries.ts";
import { CONTROL_TASK_QUEUE } from "../core/temporal.ts";

const { stepRecovery } = proxyActivities<RecoveryActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  // A step takes a second or two: one whose control plane died is tried again soon.
  startToCloseTimeout: "20 seconds",
  // Tried until it answers: a job waits out a control plane or Postgres that is down.
  retry: { maximumInterval: "30 seconds" },
});

/** Steps in one run before it goes on as a new one, its history kept short. */
const STEPS_PER_RUN = 500;

export async function recoverRequests(recoveryId: string): Promise<void> {
  for (let step = 1; ; step++) {
    const outcome = await stepRecovery(recoveryId);
    if (outcome === "ended") return;
    if (step >= STEPS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof recoverRequests>(recoveryId);
    }
    if (outcome === "idle") await sleep(RECOVERY_STEP_MS);
  }
}
