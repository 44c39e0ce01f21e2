/**
 * Asks Temporal's HTTP API (DescribeTaskQueue, `GET /api/v1/namespaces/{ns}/task-queues/{tq}`)
 * whether a worker takes Relay's tasks, for /readyz and the metrics. Answers are kept a few
 * seconds, so probes and scrapes add no load on Temporal and nothing on the request path.
 */
import {
  cachedFor,
  judgeTaskQueue,
  type QueueReport,
  type TaskQueueHealth,
  type TaskQueueType,
} from "../core/task-queue.ts";
import { TASK_QUEUE } from "../core/temporal.ts";

export interface TaskQueueOptions {
  baseUrl: string;
  namespace: string;
  apiKey?: string | undefined;
  fetch: typeof fetch;
}

const CACHE_MS = 5000;

interface DescribeAnswer {
  pollers?: { lastAccessTime?: string }[];
  stats?: {
    approximateBacklogCount?: string;
    approximateBacklogAge?: string;
  };
}

export function taskQueueHealth(options: TaskQueueOptions): () => Promise<TaskQueueHealth> {
  const url = `${options.baseUrl}/api/v1/namespaces/${encodeURIComponent(options.namespace)}/task-queues/${TASK_QUEUE}`;
  const headers: Record<string, string> = options.apiKey
    ? { authorization: `Bearer ${options.apiKey}` }
    : {};
  async function describe(type: TaskQueueType): Promise<QueueReport> {
    const query = `taskQueueType=TASK_QUEUE_TYPE_${type.toUpperCase()}&reportStats=true`;
    const response = await options.fetch(`${url}?${query}`, { headers });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`Temporal's HTTP API answered ${response.status} for the task queue`);
    }
    const answer = (await response.json()) as DescribeAnswer;
    return {
      lastPolls: (answer.pollers ?? []).flatMap((p) =>
        p.lastAccessTime ? [new Date(p.lastAccessTime)] : [],
      ),
      backlogCount: Number(answer.stats?.approximateBacklogCount ?? 0),
      // A protobuf Duration in JSON: seconds with an "s" ("6.03s").
      backlogAgeSeconds: Number.parseFloat(answer.stats?.approximateBacklogAge ?? "0") || 0,
    };
  }
  return cachedFor(CACHE_MS, async () => {
    const [workflow, activity] = await Promise.all([describe("workflow"), describe("activity")]);
    return judgeTaskQueue({ workflow, activity }, new Date());
  });
}
