/**
 * A schedule's fire (./schedules.ts) on the dev server: its one call runs on the control plane's
 * task queue (an activity-only worker here, as control/control-worker.ts runs) with the fire's
 * workflow id as its Idempotency-Key, and is tried again when a try fails. The call itself is
 * test/schedules.test.ts's. `RECORD_HISTORIES=1` records a history for replay.test.ts.
 */
import { Worker } from "@temporalio/worker";
import { expect, test } from "vitest";
import { CONTROL_TASK_QUEUE, SCHEDULE_FIRE_WORKFLOW } from "../core/temporal.ts";
import {
  env,
  nextId,
  recordHistory,
  taskQueue,
  withMockedWorker,
} from "../test/workflow-worker.ts";
import type { fireSchedule } from "./workflows.ts";

withMockedWorker();

test("fireSchedule sends its call as the fire's id, again after a failed try, and answers its status", async () => {
  const tries: { scheduleId: string; fireId: string }[] = [];
  const control = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: CONTROL_TASK_QUEUE,
    activities: {
      sendScheduledCall: async (fire: { scheduleId: string; fireId: string }) => {
        tries.push(fire);
        if (tries.length === 1) throw new Error("the edge is down");
        return 202;
      },
    },
  });
  const scheduleId = nextId("sch");
  const fireId = `${scheduleId}-2026-12-04T12:00:00Z`;
  await control.runUntil(async () => {
    const fire = await env.client.workflow.start<typeof fireSchedule>(SCHEDULE_FIRE_WORKFLOW, {
      taskQueue,
      workflowId: fireId,
      args: [scheduleId],
    });
    expect(await fire.result()).toBe(202);
    await recordHistory(fire, "schedule-fired-after-a-retry");
  });
  expect(tries).toEqual([
    { scheduleId, fireId },
    { scheduleId, fireId },
  ]);
});
