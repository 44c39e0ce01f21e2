/**
 * How Relay's worker polls Temporal, shared with the ceiling probe's bare worker (bench/) so the
 * ceiling it measures is the one Relay's worker could reach.
 */
import type { WorkerOptions } from "@temporalio/worker";

export const workerPolling = {
  // A workflow's first task comes on the task queue's normal (non-sticky) queue; later ones on
  // the sticky queue of the worker that ran the one before. Relay's requests and sync calls
  // mostly finish in their first task, so most tasks are first tasks: of the default 10
  // workflow-task polls, 8 wait on the normal queue (Temporal's default is 2), so a new task
  // finds a poll waiting (matched at once, not written to the queue's store first).
  nonStickyToStickyPollRatio: 0.8,
} as const satisfies Partial<WorkerOptions>;
