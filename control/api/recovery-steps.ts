/**
 * A recovery job's step (core/recoveries.ts), the activity the control plane serves its workflow:
 * settles the replays that ended, starts replays up to the window while the job runs (each a
 * replay like a member's, ./replay.ts, so its credits, the caps and each target's flow control
 * apply), cancels those under way once the job is cancelled, and records it all. Everything it
 * knows is in Postgres, so a step taken twice starts nothing twice.
 */
import { WorkflowNotFoundError } from "@temporalio/client";
import { RelayError } from "../../core/errors.ts";
import { finishedStatuses } from "../../core/model.ts";
import {
  RECOVERY_STARTS_AT_ONCE,
  RECOVERY_STEP_BUDGET_MS,
  RECOVERY_WINDOW,
  type RecoveryActivities,
  replayOutcome,
} from "../../core/recoveries.ts";
import { projectById } from "../../store/projects.ts";
import type { Match, RecoveryRow, RecoveryStep, RunningReplay } from "../../store/recoveries.ts";
import * as recoveries from "../../store/recoveries.ts";
import { undoReplay } from "../../store/request-log.ts";
import { type ReplayDeps, replayWorkflowId, resumeReplay, startReplay } from "./replay.ts";

type StepOutcome = Awaited<ReturnType<RecoveryActivities["stepRecovery"]>>;

export function recoveryActivities(deps: ReplayDeps): RecoveryActivities {
  return { stepRecovery: (recoveryId) => stepRecovery(deps, recoveryId) };
}

async function stepRecovery(deps: ReplayDeps, recoveryId: string): Promise<StepOutcome> {
  const job = await recoveries.findRecovery(deps.sql, recoveryId);
  // Gone with its project, or ended by a step whose answer was lost.
  if (!job || job.finishedAt) return "ended";
  const replays = await recoveries.runningReplays(deps.sql, recoveryId);
  const ended = (r: RunningReplay) => finishedStatuses.includes(r.status);
  const settled = replays
    .filter(ended)
    .map((r) => ({ requestId: r.requestId, outcome: replayOutcome(r.status) }));
  const running = await resumeLost(
    deps,
    job,
    replays.filter((r) => !ended(r)),
  );
  if (job.state === "cancelled") await cancelReplays(deps, running);
  const more =
    job.state === "running"
      ? await startMore(deps, job, RECOVERY_WINDOW - running.length)
      : { skipped: 0, started: 0, exhausted: job.exhausted, busy: false };
  const idle = running.length + more.started === 0;
  const completes = job.state === "running" && more.exhausted && !more.state;
  const finished = idle && (completes || job.state !== "running" || more.state !== undefined);
  await recoveries.recordStep(deps.sql, recoveryId, {
    ...more,
    settled,
    ...(completes && idle && { state: { to: "completed" } }),
    finished,
  });
  return finished ? "ended" : more.busy ? "busy" : "idle";
}

/**
 * Replays whose step died between their commit and their start: started now while the job runs,
 * or undone (their holds given back, their requests as they were) once it does not or when they
 * cannot start any more. Answers `running` less those undone.
 */
async function resumeLost(deps: ReplayDeps, job: RecoveryRow, running: RunningReplay[]) {
  const undone = new Set<string>();
  for (const lost of running.filter((r) => r.startLost)) {
    const resumed =
      job.state === "running" &&
      (await resumeReplay(deps, job.projectId, lost.requestId, {
        replay: lost.replay,
        onlyTarget: job.filter.targetId,
      }).then(
        () => true,
        (error: unknown) => {
          if (error instanceof RelayError) return false;
          throw error;
        },
      ));
    if (!resumed) {
      const workflowId = replayWorkflowId(lost.requestId, lost.replay);
      await undoReplay(deps.sql, lost.requestId, { ...lost, workflowId }, deps.waitingCaps);
      undone.add(lost.requestId);
    }
    await recoveries.replayLaunched(deps.sql, job.recoveryId, lost.requestId);
  }
  return running.filter((r) => !undone.has(r.requestId));
}

/** Cancels replays under way (each its workflow's cancel: one that delivered stays delivered). */
export async function cancelReplays(deps: ReplayDeps, running: RunningReplay[]): Promise<void> {
  const client = await deps.temporal();
  await Promise.all(
    running.map((r) =>
      client.workflow
        .getHandle(replayWorkflowId(r.requestId, r.replay))
        .cancel()
        .catch((error: unknown) => {
          if (!(error instanceof WorkflowNotFoundError)) throw error;
        }),
    ),
  );
}

/** How a match's replay start went. */
type Started = "started" | "taken" | "skipped" | { stop: RelayError };

/**
 * Starts replays of the job's next matches, at most `room`, a few at once: a match that cannot
 * replay (not finished now, erased, its targets gone) is skipped; a full cap waits for the next
 * step, and credits that run out fail the job, from the first match refused on.
 */
async function startMore(
  deps: ReplayDeps,
  job: RecoveryRow,
  room: number,
): Promise<Omit<RecoveryStep, "settled" | "finished"> & { started: number; busy: boolean }> {
  const step = { skipped: 0, started: 0, exhausted: job.exhausted, busy: false };
  if (job.exhausted || room <= 0) return step;
  const project = await projectById(deps.sql, job.projectId);
  if (!project) return { ...step, exhausted: true };
  const matches = await recoveries.nextMatches(deps.sql, job, room);
  const start = async (match: Match): Promise<Started> => {
    try {
      const started = await startReplay(deps, { ...project, projectId: job.projectId }, match, {
        ...(job.filter.targetId !== undefined && { onlyTarget: job.filter.targetId }),
        claim: {
          take: (tx) => recoveries.takeUp(tx, job.recoveryId, match.requestId),
          numbered: (tx, begun) =>
            recoveries.numberReplay(tx, job.recoveryId, match.requestId, begun),
          launched: () => recoveries.replayLaunched(deps.sql, job.recoveryId, match.requestId),
        },
      });
      return started ? "started" : "taken";
    } catch (error) {
      if (!(error instanceof RelayError)) throw error;
      return error.code === "conflict" ? "skipped" : { stop: error };
    }
  };
  let cursor: [Date, string] | undefined;
  const stopAt = Date.now() + RECOVERY_STEP_BUDGET_MS;
  for (let at = 0; at < matches.length; at += RECOVERY_STARTS_AT_ONCE) {
    if (Date.now() > stopAt) return { ...step, ...(cursor && { cursor }), busy: true };
    const chunk = matches.slice(at, at + RECOVERY_STARTS_AT_ONCE);
    const outcomes = await Promise.all(chunk.map(start));
    step.started += outcomes.filter((o) => o === "started").length;
    for (const [i, outcome] of outcomes.entries()) {
      if (typeof outcome === "object") {
        // The place stays before it: what started after it was taken up, and is not started twice.
        const { code, message } = outcome.stop;
        if (code === "limit_exceeded") return { ...step, ...(cursor && { cursor }) };
        if (code !== "insufficient_credits") throw outcome.stop;
        return { ...step, ...(cursor && { cursor }), state: { to: "failed", error: message } };
      }
      if (outcome === "skipped") step.skipped++;
      const match = chunk[i] as Match;
      cursor = [match.receivedAt, match.requestId];
    }
  }
  return { ...step, ...(cursor && { cursor }), exhausted: matches.length < room };
}
