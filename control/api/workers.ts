/**
 * Whether a worker takes Relay's tasks, asked of Temporal (DescribeTaskQueue) through the
 * control plane's client and kept a few seconds: the panel reads it with every project.
 */
import type { Client } from "@temporalio/client";
import {
  cachedFor,
  judgeTaskQueue,
  type QueueReport,
  type TaskQueueHealth,
} from "../../core/task-queue.ts";
import { TASK_QUEUE } from "../../core/temporal.ts";

const CACHE_MS = 5000;
const DEADLINE_MS = 2000;
/** temporal.api.enums.v1.TaskQueueType */
const WORKFLOW = 1;
const ACTIVITY = 2;

/** A protobuf Timestamp or Duration (seconds may be a Long) in seconds. */
const seconds = (value?: { seconds?: unknown; nanos?: number | null } | null) =>
  value ? Number(value.seconds ?? 0) + (value.nanos ?? 0) / 1e9 : 0;

export function taskQueueHealth(client: () => Promise<Client>): () => Promise<TaskQueueHealth> {
  async function describe(taskQueueType: number): Promise<QueueReport> {
    const c = await client();
    // Bounded: a project page waits for this answer.
    const answer = await c.withDeadline(Date.now() + DEADLINE_MS, () =>
      c.workflowService.describeTaskQueue({
        namespace: c.options.namespace,
        taskQueue: { name: TASK_QUEUE },
        taskQueueType,
        reportStats: true,
      }),
    );
    return {
      lastPolls: (answer.pollers ?? []).flatMap((p) =>
        p.lastAccessTime ? [new Date(seconds(p.lastAccessTime) * 1000)] : [],
      ),
      backlogCount: Number(answer.stats?.approximateBacklogCount ?? 0),
      backlogAgeSeconds: seconds(answer.stats?.approximateBacklogAge),
    };
  }
  return cachedFor(CACHE_MS, async () => {
    const [workflow, activity] = await Promise.all([describe(WORKFLOW), describe(ACTIVITY)]);
    return judgeTaskQueue({ workflow, activity }, new Date());
  });
}
