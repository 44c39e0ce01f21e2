/**
 * What the activities are built from: what the worker gives them, and what an attempt at a
 * target takes of it. Apart from ./activities.ts, which assembles them, so ./attempts.ts can
 * take them.
 */

import type { Hold } from "../core/circuit.ts";
import type { LaneJoin } from "../core/lanes-before.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import type { RetrySchedule } from "../core/retry.ts";
import type { SigningKey } from "../core/signing.ts";
import type { CallTarget } from "../core/target-request.ts";
import type { RunTransform } from "../core/transform.ts";
import type {
  AttemptEnd,
  AttemptEnded,
  AttemptStart,
  StartedAttempt,
} from "../store/attempt-log.ts";
import type { Sql } from "../store/db.ts";
import type { TellTurns } from "../store/lanes.ts";
import type { PlanCaps } from "../store/waiting.ts";
import type { AttemptOutcome } from "./observability.ts";
import type { SyncAnswers } from "./sync-answers.ts";

/** How deliveries are retried: configuration, so tests can shrink it. */
export interface RetryPolicy extends RetrySchedule {
  /** How long one attempt may take before Temporal counts it lost (a worker died). */
  attemptTimeoutMs: number;
}

export interface ActivityDeps {
  sql: Sql;
  /** This worker process, as the log names it on its attempts (store/workers.ts). */
  workerId: string;
  retryPolicy: RetryPolicy;
  /**
   * Reaches targets, as the Node edge's streams do: connects only to addresses the target rules
   * allow, checked (and pinned) where it connects; a refused one rejects with `TargetRefused`.
   */
  callTarget: CallTarget;
  /** Runs a target's transformation before a call (the worker's sandbox threads). */
  transform: RunTransform;
  /** Real time plus the dev clock's offset, read from Postgres. */
  now: () => Promise<Date>;
  sealingKey: CryptoKey;
  /** How long a finished request stays in the log. */
  logRetentionMs: number;
  /** Deletes a deleted project's Temporal histories (a batch operation; platform/temporal.ts). */
  deleteHistories: (slug: string) => Promise<void>;
  /** Each plan's cap on a project's scheduled and held deliveries. */
  waitingCaps: PlanCaps;
  /** Told of every finished attempt (the log and the metrics). */
  observeAttempt: (attempt: AttemptOutcome) => void;
  /** Told of a circuit opened, recovered or disabled (the log and the metrics). */
  observeCircuit: (targetId: string, transition: "opened" | "recovered" | "disabled") => void;
  /**
   * Starts the target's circuit workflow unless it runs: it probes an open circuit and lets the
   * waiting deliveries go once the target may be tried again.
   */
  ensureCircuit: (targetId: string) => Promise<void>;
  /**
   * Starts the target's drain (its circuit workflow) unless it runs, and tells a running one that
   * a delivery waits for the target's limits (core/flow.ts), so it does not end meanwhile.
   */
  ensureDrain: (targetId: string) => Promise<void>;
  /** Each project's share of this worker, by pool (core/project-slots.ts). */
  slots: WorkerSlots;
  /** Where a sync call handed to this worker waits for its answer (./sync-calls.ts). */
  syncAnswers?: SyncAnswers;
  /**
   * Ordering lanes: parked requests told their turn (store/lanes.ts); lanes begun before lanes in
   * Postgres (./lanes-before.ts) joined, and their heads checked.
   */
  lanes: {
    tellTurns: TellTurns;
    join: (laneId: string, project: string, join: LaneJoin) => Promise<void>;
    running: (workflowIds: string[]) => Promise<string[]>;
  };
}

/** The worker's pools: each bounds what one project may have in flight on it. */
export interface WorkerSlots {
  /** Async attempts, first ones and retries. */
  attempts: ProjectSlots;
  sync: ProjectSlots;
  notifications: ProjectSlots;
  /** Batch activities listening past a second for their ordered requests' turns (./batch-lanes.ts). */
  turnListeners: ProjectSlots;
}

/** What an attempt at a target needs of the worker. */
export interface AttemptDeps
  extends Pick<
    ActivityDeps,
    | "sql"
    | "now"
    | "callTarget"
    | "transform"
    | "observeAttempt"
    | "observeCircuit"
    | "ensureCircuit"
    | "retryPolicy"
    | "slots"
  > {
  /** The keys that sign for a target's endpoint at a time (`signingKeys`). */
  signingKeysOf: (targetId: string, at: Date) => Promise<SigningKey[]>;
  /** Whether a target's deliveries wait (an open circuit, a pause), and why. */
  holdOf: (targetId: string) => Promise<Hold | null>;
  /**
   * Logs an attempt's start, and its end: each with the others made at once, as one set in one
   * commit (store/group-commit.ts).
   */
  startAttempt: (start: AttemptStart) => Promise<StartedAttempt>;
  endAttempt: (end: AttemptEnd) => Promise<AttemptEnded>;
  /** What aborts an attempt's call: its activity's cancellation (a batch's, ./batch-aborts.ts). */
  abortSignal: () => AbortSignal;
}
