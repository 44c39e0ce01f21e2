/**
 * A batch's requests whose first attempts left them waiting, for limited targets' room
 * (core/flow.ts), for a retry's backoff of a minute or less, for their project's share of the
 * worker, or (ordered ones) for their lane's turn (./batch-lanes.ts), wait in the batch, under
 * its workflow id, rather than each as a workflow of its own:
 * under load, a workflow per waiting delivery cost the worker and Temporal more than the
 * deliveries themselves (a fan-out whose share was full: 4-7x a plain call's CPU). Each target's
 * drain (./circuit.ts) lets the room's waiters go to the batch, a turn's signal the lane's, a
 * timer the others; the batch makes their attempts in one local activity per wake. A request
 * that needs more (a longer retry, its target's circuit or pause, a cancel) continues as its own
 * workflow from its verdicts, as the batch's others do (./batch.ts).
 */
import {
  condition,
  patched,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from "@temporalio/workflow";
import type { DeliveryInput } from "../core/delivery.ts";
import type { Activities } from "./activities.ts";
import {
  asyncDeliveries,
  type FirstAttempt,
  goesOn,
  type InLane,
  isThrottled,
  targetIdsOf,
} from "./deliveries.ts";
import { goSignal, handOnSignal, releaseSignal } from "./signals.ts";

/** A batch's request and its targets' verdicts so far, in its async targets' order. */
export interface InBatch {
  request: DeliveryInput;
  verdicts: (FirstAttempt | null)[];
  /** An ordered request not attempted yet: it waits for its lane's turn, or has it. */
  inLane?: InLane;
}

/** How a batch lets a request leave it: settled (its verdicts all ended), or on its own. */
export type Leave = (request: InBatch) => Promise<void>;

/**
 * The longest wait for time a request waits in its batch: the default backoff (1 s, doubling)
 * keeps a failing delivery here for six retries, about a minute, so a batch ends soon; past
 * that, or a longer Retry-After, the request goes on as its own workflow.
 */
export const WAIT_IN_BATCH_MAX_MS = 60_000;

/** How long a verdict's delivery waits for its next attempt when it waits for time, else null. */
export function timedWaitMs(verdict: FirstAttempt | null | undefined): number | null {
  if (verdict?.kind === "retry") return verdict.delayMs;
  if (verdict?.kind === "busy") return verdict.waitMs;
  return null;
}

/**
 * Whether a request's verdicts let it wait in its batch: something goes on, and all that does
 * waits for a limited target's room or (`forTime`, batches begun since) for time, briefly.
 */
export function waitsInBatch(verdicts: (FirstAttempt | null)[], forTime: boolean): boolean {
  const here = (v: FirstAttempt | null) =>
    isThrottled(v) ||
    (forTime && (timedWaitMs(v) ?? Number.POSITIVE_INFINITY) <= WAIT_IN_BATCH_MAX_MS);
  return verdicts.some(goesOn) && verdicts.every((v) => !goesOn(v) || here(v));
}

/**
 * The longest an ordered request waits in its batch for its lane's turn: a contended key's
 * backlog drains through batches, each hand-over a signal; past this (its head retrying for
 * hours, say), it waits as a workflow of its own, and the batch ends.
 */
const TURN_WAIT_IN_BATCH_MS = 600_000;
/**
 * How long a batch told some of its waiting requests' turns waits for the others' before it
 * attempts them: under a contended key the turns come from many batches a few milliseconds
 * apart, and each wake is a workflow task and an activity for the two or three told so far.
 */
const GATHER_TURNS_MS = 20;
/** Batches begun before they gathered their turns attempted each told request at once. */
const GATHER_TURNS = "batch-gathers-turns";
/**
 * Batches begun before waited on, when a turn was told mid-wait, until their next wake (up to
 * TURN_WAIT_IN_BATCH_MS): the gathering's end had no timer of its own.
 */
const WAKE_TO_GATHER = "batch-wakes-to-gather";
/** Batches begun before kept a gathering no request was in turn for open, waking every ms. */
const FORGETS_STALE_TELLS = "batch-forgets-stale-tells";
/** How long a held delivery waits for its release before it is held again (as ./workflows.ts). */
const HOLD_RECHECK_MS = 3_600_000;
/** Past this many events the batch's history is long: what still waits goes on on its own. */
const LONG_HISTORY = 10_000;
/** Room beyond the slowest target's timeout for a slot's wait, the room's, and the log's writes. */
const ATTEMPT_SLACK_MS = 20_000;

export async function waitInBatch(
  project: string,
  held: InBatch[],
  leave: Leave,
  /** Waits for time too (batches begun before waited only for room: Temporal's patching). */
  forTime: boolean,
): Promise<void> {
  const { workflowId } = workflowInfo();
  const released = new Set<string>();
  const handOn = new Set<string>();
  setHandler(releaseSignal, ({ targetId, requestId }) => {
    if (requestId) released.add(pair(requestId, targetId));
  });
  setHandler(handOnSignal, (requestId) => {
    handOn.add(requestId);
  });
  /** Ordered requests told their turn came at a target (store/lanes.ts). */
  const told = new Set<string>();
  /** When the first turn not yet attempted was told (workflow time), while gathering. */
  let toldAt: number | null = null;
  setHandler(goSignal, ({ requestId, told: turns }) => {
    for (const turn of turns ?? []) told.add(turn.requestId);
    if (requestId) told.add(requestId);
    toldAt ??= Date.now();
  });
  const gathers = forTime && patched(GATHER_TURNS);
  const wakesToGather = gathers && patched(WAKE_TO_GATHER);
  /** When each request waiting for its lane's turn stops waiting here and goes on on its own. */
  const turnDeadline = new Map<InBatch, number>();
  const awaitTurn = (w: InBatch) => {
    if (w.inLane && !turnDeadline.has(w)) turnDeadline.set(w, Date.now() + TURN_WAIT_IN_BATCH_MS);
  };
  const inTurn = (w: InBatch) => w.inLane === "ready" || told.has(w.request.requestId);
  /** The turns told are gathered: the window since the first passed, or none waits untold. */
  const gathered = () =>
    !gathers ||
    toldAt === null ||
    Date.now() >= toldAt + GATHER_TURNS_MS ||
    [...waiting].every((w) => w.inLane === undefined || busy.has(w) || inTurn(w));
  const longest = Math.max(
    0,
    ...held.flatMap(({ request }) => request.targets.map((t) => t.timeoutSeconds)),
  );
  const local = proxyLocalActivities<Activities>({
    startToCloseTimeout: longest * 1000 + ATTEMPT_SLACK_MS,
    retry: { maximumAttempts: 1 },
  });
  const bookkeeping = proxyLocalActivities<Activities>({
    startToCloseTimeout: "10 seconds",
    retry: { maximumInterval: "1 minute" },
  });
  const waiting = new Set(held);
  const busy = new Set<InBatch>();
  /** When each target's next attempt is due (workflow time), for those waiting for time. */
  const dueAt = new Map<InBatch, (number | null)[]>();
  /** Sets when `targetIds` of `w` (all its targets when absent) are due by their verdicts. */
  const setDue = (w: InBatch, targetIds?: string[]) => {
    const all = targetIdsOf(asyncDeliveries(w.request));
    const due = dueAt.get(w) ?? all.map(() => null);
    all.forEach((targetId, i) => {
      if (targetIds && !targetIds.includes(targetId)) return;
      const ms = forTime ? timedWaitMs(w.verdicts[i]) : null;
      due[i] = ms === null ? null : Date.now() + ms;
    });
    dueAt.set(w, due);
  };
  for (const w of held) {
    setDue(w);
    awaitTurn(w);
  }
  const dueTargets = (w: InBatch) => {
    const targetIds = targetIdsOf(asyncDeliveries(w.request));
    return (dueAt.get(w) ?? []).flatMap((at, i) =>
      at !== null && at <= Date.now() ? [targetIds[i] as string] : [],
    );
  };
  let recheckAt = Date.now() + HOLD_RECHECK_MS;
  /** The next wake: the earliest due attempt or end of a wait for a turn, or the holds' recheck. */
  const nextWake = () =>
    Math.min(
      recheckAt,
      ...[...waiting]
        .filter((w) => !busy.has(w))
        .flatMap((w) => [
          ...(dueAt.get(w) ?? []).filter((at) => at !== null),
          ...(w.inLane ? [turnDeadline.get(w) ?? 0] : []),
        ]),
      ...(gathers && toldAt !== null ? [toldAt + GATHER_TURNS_MS] : []),
    );
  const holdAll = async () => {
    const holds = [...waiting].filter((w) => !busy.has(w)).flatMap(heldOf);
    // Waiting only for time holds nothing (batches begun before held all, even none).
    if (forTime && holds.length === 0) return;
    await bookkeeping.holdInBatch(workflowId, holds);
  };

  /** Leaves the batch on its own: its deliveries held here wait in its own workflow. */
  const goAlone = async (request: InBatch) => {
    waiting.delete(request);
    await bookkeeping.forgetHeldInBatch(workflowId, [request.request.requestId]);
    await leave(request);
  };
  const attemptReleased = async (group: Group[]) => {
    for (const { request } of group) busy.add(request);
    const verdicts = await local
      .releasedAttemptsOfBatch(
        project,
        workflowId,
        group.map(({ request, targetIds, timed }) => ({
          request: request.request,
          targetIds,
          ...(timed.length > 0 && { timed }),
          ...(request.inLane && { inLane: true }),
        })),
      )
      .catch(() => group.map(({ targetIds }) => targetIds.map(() => null)));
    attemptsEnded++;
    await Promise.all(
      group.map(async ({ request, targetIds }, i) => {
        busy.delete(request);
        const answer = verdicts[i];
        if (typeof answer === "string") {
          request.inLane = answer; // not its turn yet, or its turn came too late to go
          awaitTurn(request);
          return;
        }
        delete request.inLane;
        const all = targetIdsOf(asyncDeliveries(request.request));
        targetIds.forEach((targetId, j) => {
          request.verdicts[all.indexOf(targetId)] = answer?.[j] ?? null;
        });
        setDue(request, targetIds);
        // A failed attempt (null) goes on on its own: its workflow tries again.
        if (!waitsInBatch(request.verdicts, forTime)) {
          waiting.delete(request);
          await leave(request);
        }
      }),
    );
  };

  await holdAll();
  const running: Promise<void>[] = [];
  /** Rounds of attempts ended: one that ended sets new times due, so the wait is timed again. */
  let attemptsEnded = 0;
  while (waiting.size > 0) {
    const endedBefore = attemptsEnded;
    const ready = () =>
      [...waiting].some(
        (w) =>
          !busy.has(w) &&
          (handOn.has(w.request.requestId) ||
            targetsOf(w).some((t) => released.has(pair(w.request.requestId, t))) ||
            dueTargets(w).length > 0 ||
            (w.inLane !== undefined &&
              ((inTurn(w) && gathered()) || Date.now() >= (turnDeadline.get(w) ?? 0)))),
      );
    const timeout = forTime ? Math.max(1, nextWake() - Date.now()) : HOLD_RECHECK_MS;
    const toldBefore = toldAt;
    // Ended attempts set new times due; a first turn told sets when the gathering ends.
    const retime = () =>
      forTime && (attemptsEnded !== endedBefore || (wakesToGather && toldAt !== toldBefore));
    if (!(await condition(() => ready() || waiting.size === 0 || retime(), timeout))) {
      if (!forTime || Date.now() >= recheckAt) {
        await holdAll();
        recheckAt = Date.now() + HOLD_RECHECK_MS;
        continue;
      }
    }
    const group: Group[] = [];
    // A lane with a turn come: its requests waiting here are all asked, so turns passed between
    // them go in the one activity.
    const lanesInTurn = new Set(
      gathered()
        ? [...waiting]
            .filter((w) => !busy.has(w) && inTurn(w))
            .map((w) => w.request.ordering?.laneId)
        : [],
    );
    // Gathered and none in turn: the tells were for requests gone (a turn told twice), and a
    // gathering left open would time every wait to its end, long past.
    if (lanesInTurn.size > 0 || (toldAt !== null && gathered() && patched(FORGETS_STALE_TELLS))) {
      toldAt = null;
    }
    for (const w of [...waiting]) {
      if (busy.has(w)) continue;
      const { requestId } = w.request;
      const turnTooLate =
        w.inLane === "waits" && !inTurn(w) && Date.now() >= (turnDeadline.get(w) ?? 0);
      if (handOn.has(requestId) || turnTooLate || workflowInfo().historyLength > LONG_HISTORY) {
        running.push(goAlone(w));
        continue;
      }
      if (w.inLane) {
        if (lanesInTurn.has(w.request.ordering?.laneId)) {
          told.delete(requestId);
          group.push({ request: w, targetIds: targetIdsOf(asyncDeliveries(w.request)), timed: [] });
        }
        continue;
      }
      const timed = dueTargets(w);
      const targetIds = [
        ...targetsOf(w).filter((t) => released.delete(pair(requestId, t))),
        ...timed,
      ];
      if (targetIds.length > 0) group.push({ request: w, targetIds, timed });
    }
    if (group.length > 0) running.push(attemptReleased(group));
  }
  await Promise.all(running);
}

/** Requests of one wake and the targets each is tried at: let go by their drains, or due. */
interface Group {
  request: InBatch;
  targetIds: string[];
  /** Those of `targetIds` whose wait was for time: tried as any attempt, not from the queue. */
  timed: string[];
}

/** A request's limited targets it waits for, by id. */
function targetsOf({ request, verdicts }: InBatch): string[] {
  return asyncDeliveries(request)
    .filter((_, i) => isThrottled(verdicts[i]))
    .map((d) => d.target.id);
}

function heldOf(w: InBatch) {
  const { requestId, receivedAt } = w.request;
  return targetsOf(w).map((targetId) => ({ targetId, requestId, acceptedAt: receivedAt }));
}

const pair = (requestId: string, targetId: string) => `${requestId} ${targetId}`;
