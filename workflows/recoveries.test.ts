/**
 * A recovery job's workflow (./recoveries.ts) on the dev server: it steps on the control plane's
 * task queue (an activity-only worker here, as control/control-worker.ts runs), pausing after a
 * step with nothing more to start, until a step says the job ended. The steps themselves are test/recoveries.test.ts's.
 * `RECORD_HISTORIES=1` records a history for replay.test.ts.
 */
import { Worker } from "@temporalio/worker";
import { expect, test } from "vitest";
import { RECOVERY_STEP_MS } from "../core/recoveries.ts";
import { CONTROL_TASK_QUEUE, RECOVERY_WORKFLOW } from "../core/temporal.ts";
import {
  env,
  nextId,
  recordHistory,
  taskQueue,
  withMockedWorker,
} from "../test/workflow-worker.ts";
import type { recoverRequests } from "./workflows.ts";

withMockedWorker();

test("recoverRequests steps at once after a busy step, after a pause after an idle one, until one says the job ended", async () => {
  const steps: { recoveryId: string; at: number }[] = [];
  let pauses: number[] = [];
  const control = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: CONTROL_TASK_QUEUE,
    activities: {
      stepRecovery: async (recoveryId: string) => {
        steps.push({ recoveryId, at: Date.now() });
        return (["busy", "idle", "ended"] as const)[steps.length - 1];
      },
    },
  });
  const recoveryId = nextId("rec");
  await control.runUntil(async () => {
    const job = await env.client.workflow.start<typeof recoverRequests>(RECOVERY_WORKFLOW, {
      taskQueue,
      workflowId: recoveryId,
      args: [recoveryId],
    });
    await job.result();
    const { events } = await job.fetchHistory();
    pauses = (events ?? []).flatMap(({ timerStartedEventAttributes: timer }) => {
      const { seconds, nanos } = timer?.startToFireTimeout ?? {};
      return timer ? [Number(seconds ?? 0) * 1000 + (nanos ?? 0) / 1e6] : [];
    });
    await recordHistory(job, "recovery-stepped");
  });
  expect(steps.map((s) => s.recoveryId)).toEqual([recoveryId, recoveryId, recoveryId]);
  // One pause, after the idle step, of its length.
  expect(pauses).toEqual([RECOVERY_STEP_MS]);
});
