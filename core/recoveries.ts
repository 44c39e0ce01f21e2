/**
 * Recovery jobs: a replay of many finished requests by filter (docs/api.md "Recovery jobs"), run
 * by a workflow (workflows/recoveries.ts) whose steps are the control plane's activities, since
 * a replay is the control plane's to start. The rules here are what a step and the API share.
 */
import type { RequestStatus } from "./model.ts";

/** In the order of the proto enum RecoveryState. */
export const recoveryStates = ["running", "completed", "cancelled", "failed"] as const;
export type RecoveryState = (typeof recoveryStates)[number];

/** What a job replays, as it is stored with it. */
export interface RecoveryFilter {
  statuses: RequestStatus[];
  endpoint?: { line: string; path: string };
  /** Only this target: a match is a request it did not get, and the replay goes to it alone. */
  targetId?: string;
  /** Received at or after this (ISO 8601). */
  since?: string;
  /** Received before this (ISO 8601); a job's is at most the time it started. */
  until?: string;
  requestId?: string;
  idempotencyKey?: string;
  /** Requests with an attempt a target answered with this status code. */
  targetStatus?: number;
}

/** What a job replays when no status is asked for: the failure queue. */
export const RECOVERED_BY_DEFAULT: RequestStatus[] = ["failed", "partially_failed"];

/**
 * A job's replays under way at once: its matches wait in Postgres, not in Temporal, and each
 * target's flow control paces the replays themselves.
 */
export const RECOVERY_WINDOW = 100;
/** Replays a step starts at once (each a few Temporal and Postgres round trips). */
export const RECOVERY_STARTS_AT_ONCE = 16;
/** The pause before a job's next step when the last had nothing more to start. */
export const RECOVERY_STEP_MS = 500;
/** How long a step goes on starting replays (each reads its request's input from Temporal). */
export const RECOVERY_STEP_BUDGET_MS = 700;
/** Jobs a project may have running at once (409 past it). */
export const RECOVERIES_RUNNING_PER_PROJECT = 3;
/** Jobs a project may keep, ended ones included until the log's retention (409 past it). */
export const RECOVERIES_KEPT_PER_PROJECT = 1000;

/** How a replay the job started ended: delivered to every target it went to, or not. */
export const replayOutcome = (status: RequestStatus): "sent" | "failed" =>
  status === "delivered" ? "sent" : "failed";

/** The control plane's activities a job's workflow calls. */
export interface RecoveryActivities {
  /**
   * One step: settles the replays that ended, cancels the rest once the job is cancelled, starts
   * replays up to the window while it runs, and records the progress. "busy": it stopped with
   * more to start (the next step follows at once); "idle": the next one may pause.
   */
  stepRecovery(recoveryId: string): Promise<"ended" | "busy" | "idle">;
}
