/**
 * Whether a worker takes Relay's tasks, judged from what Temporal's DescribeTaskQueue says of
 * the workflow and the activity task queue. Temporal keeps a worker in its poller list for
 * five minutes after its last poll, and a live, idle worker's long poll lasts a minute, so the
 * poller list alone notices a dead worker only after that minute. Sooner: a task has waited
 * longer than any worker's last poll is old, which a live worker (that polls as soon as it has
 * a free slot, and is handed the oldest task) never lets happen for long.
 */

export type TaskQueueType = "workflow" | "activity";

/** One task queue type's DescribeTaskQueue answer, runtime-neutral. */
export interface QueueReport {
  /** When each worker polling this queue last polled. */
  lastPolls: Date[];
  backlogCount: number;
  backlogAgeSeconds: number;
}

export interface TaskQueueHealth {
  /** Workers that polled within POLL_FRESH_MS, by task type. */
  pollers: Record<TaskQueueType, number>;
  /** Tasks waiting for a worker, and the oldest one's wait, across both types. */
  backlogCount: number;
  backlogAgeSeconds: number;
  /** Why no worker takes Relay's tasks, in a sentence; null while one does. */
  problem: string | null;
}

/** A live worker polls again at least this often (a long poll lasts a minute). */
export const POLL_FRESH_MS = 70_000;
/** Tasks this old, with no poll since they came, have no worker taking them. */
export const STALLED_AFTER_SECONDS = 10;

export function judgeTaskQueue(
  queues: Record<TaskQueueType, QueueReport>,
  now: Date,
): TaskQueueHealth {
  const problems: string[] = [];
  const pollers = { workflow: 0, activity: 0 };
  for (const type of ["workflow", "activity"] as const) {
    const queue = queues[type];
    const sincePolls = queue.lastPolls.map((at) => (now.getTime() - at.getTime()) / 1000);
    pollers[type] = sincePolls.filter((seconds) => seconds * 1000 < POLL_FRESH_MS).length;
    if (pollers[type] === 0) {
      problems.push(`no worker polled the ${type} task queue in ${POLL_FRESH_MS / 1000} s`);
    } else if (
      queue.backlogCount > 0 &&
      queue.backlogAgeSeconds >= STALLED_AFTER_SECONDS &&
      Math.min(...sincePolls) >= queue.backlogAgeSeconds
    ) {
      problems.push(
        `${queue.backlogCount} ${type} tasks waited ${Math.round(queue.backlogAgeSeconds)} s with no worker polling`,
      );
    }
  }
  return {
    pollers,
    backlogCount: queues.workflow.backlogCount + queues.activity.backlogCount,
    backlogAgeSeconds: Math.max(
      queues.workflow.backlogAgeSeconds,
      queues.activity.backlogAgeSeconds,
    ),
    problem: problems.length > 0 ? problems.join("; ") : null,
  };
}

/**
 * `load` at most once per `ttlMs`: callers within that time share the last answer, and callers
 * while a load runs share that load, so readiness probes and scrapes cost Temporal nothing more.
 */
export function cachedFor<T>(ttlMs: number, load: () => Promise<T>, now = Date.now) {
  let last: { at: number; value: Promise<T> } | null = null;
  return (): Promise<T> => {
    if (!last || now() - last.at >= ttlMs) {
      const value = load();
      last = { at: now(), value };
      // A failed load is not kept: the next caller tries again.
      value.catch(() => {
        if (last?.value === value) last = null;
      });
    }
    return last.value;
  };
}
