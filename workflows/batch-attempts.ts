/**
 * A batch's first attempts, all in one local activity: one marker in the batch's history rather
 * than one per request. Each request's targets are tried once, as a lone request's first task
 * tries them, and a request they ended is settled here; the rest wait in the batch or continue as
 * workflows of their own (./batch.ts). Ordered requests are tried in their lanes' turns
 * (./batch-lanes.ts).
 */
import type { DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import type { ProjectSlots, Release } from "../core/project-slots.ts";
import { attemptInTurns, type LaneDeps } from "./batch-lanes.ts";
import {
  asyncDeliveries,
  type BatchedFirst,
  type DeliverInput,
  type FirstAttempt,
  goesOn,
  type InLane,
  isThrottled,
  type RequestRow,
  type TriedBefore,
  targetIdsOf,
} from "./deliveries.ts";

/** A slot of the project's share of the worker's attempts, or null when there is none. */
export type TakeSlot = () => Promise<Release | null>;

export interface BatchAttemptDeps {
  /** One first attempt, as a lone request's makes it, its slot taken with `takeSlot`. */
  attempt(
    request: RequestRow,
    delivery: DeliverInput,
    only: boolean,
    takeSlot: TakeSlot,
  ): Promise<FirstAttempt>;
  /** Requests whose first attempts ended them, settled together: their statuses, by id. */
  settle(
    settling: { requestId: string; targetIds: string[] }[],
  ): Promise<Map<string, RequestStatus>>;
  slots: ProjectSlots;
  /**
   * What the log says of these requests' earlier tries: for a delivery not to try now, its
   * verdict (./deliveries.ts `rerunVerdict`: delivered already, or in flight elsewhere).
   */
  triedBefore(requestIds: string[]): Promise<TriedBefore>;
  /** Ordered requests' turns in their lanes, and their leaving (store/lanes.ts). */
  lanes: LaneDeps;
}

/**
 * How long a batch's attempts may wait for slots of their project's share: a batch is larger
 * than the share, and attempts at a target that answers at once free theirs in milliseconds;
 * past this (a slow target), a request waits as a busy one does, on a timer of its own.
 */
const SLOT_WAIT_MS = 5000;

/** A request of a batch and the targets it is attempted at now. */
interface Asked {
  request: DeliveryInput;
  targetIds: string[];
  /** Attempted as let go by its target's drain (core/flow.ts), not as a first or timed try. */
  fromQueue: (targetId: string) => boolean;
}

/**
 * Attempts requests of the batch `carrier` (its workflow id) at the targets asked: ordered ones
 * in their lanes' turns (`waited`: those waiting there before), the others at once. This activity
 * run again (its workflow task lost with its worker) delivers nothing twice: the log says.
 */
async function attemptAll(
  deps: BatchAttemptDeps,
  project: string,
  carrier: string,
  asked: (Asked & { waited?: boolean })[],
): Promise<((FirstAttempt | null)[] | InLane)[]> {
  const triedBefore = await deps.triedBefore(asked.map((a) => a.request.requestId));
  const takeSlot = waitingFor(deps.slots, project, performance.now() + SLOT_WAIT_MS);
  const attempt = ({ request, targetIds, fromQueue }: Asked) => {
    const { targets, headers, bodyBase64, body, ...row } = request;
    const deliveries = asyncDeliveries(request);
    const only = deliveries.length === 1;
    return Promise.all(
      targetIds.map((targetId) => {
        const delivery = deliveries.find((d) => d.target.id === targetId);
        if (!delivery) return null;
        const queued = fromQueue(targetId) ? { ...delivery, fromQueue: true } : delivery;
        const before = triedBefore(delivery);
        return before
          ? Promise.resolve(before)
          : deps.attempt(row, queued, only, takeSlot).catch((): FirstAttempt | null => null);
      }),
    );
  };
  const inLanes = asked.flatMap((a, i) => {
    const lane = a.request.ordering;
    return lane
      ? [
          {
            ...a,
            i,
            laneId: lane.laneId,
            requestId: a.request.requestId,
            waited: a.waited === true,
          },
        ]
      : [];
  });
  // Its other requests' verdicts (a retry's wait, a callback) wait for the activity's end: a
  // batch that has some listens no longer than a second at a time for its turns.
  const lanes =
    inLanes.length === asked.length ? deps.lanes : { ...deps.lanes, listenLonger: () => null };
  const outcomes: ((FirstAttempt | null)[] | InLane)[] = asked.map(() => "waits");
  await Promise.all([
    inLanes.length > 0 &&
      attemptInTurns(lanes, carrier, inLanes, attempt).then((answers) => {
        inLanes.forEach(({ i }, k) => {
          outcomes[i] = answers[k] ?? "waits";
        });
      }),
    ...asked.map(async (a, i) => {
      if (!a.request.ordering) outcomes[i] = await attempt(a);
    }),
  ]);
  return outcomes;
}

/** The first attempts of a batch's requests (`carrier`: the batch's workflow id). */
export async function firstAttemptsOfBatch(
  deps: BatchAttemptDeps,
  project: string,
  carrier: string,
  requests: DeliveryInput[],
): Promise<BatchedFirst[]> {
  const outcomes = await attemptAll(
    deps,
    project,
    carrier,
    requests.map((request) => ({
      request,
      targetIds: targetIdsOf(asyncDeliveries(request)),
      fromQueue: () => false,
    })),
  );
  const firsts = requests.map((_, i) => {
    const outcome = outcomes[i] ?? "waits";
    return typeof outcome === "string" ? { inLane: outcome } : endedOrGoesOn(outcome);
  });
  const ended = requests.filter((_, i) => "ended" in (firsts[i] as object));
  // Not settled here (the log refused the write): each one's own workflow settles it.
  const settled =
    ended.length === 0
      ? new Map<string, RequestStatus>()
      : await deps
          .settle(
            ended.map((r) => ({
              requestId: r.requestId,
              targetIds: targetIdsOf(asyncDeliveries(r)),
            })),
          )
          .catch(() => null);
  return firsts.map((first, i): BatchedFirst => {
    if (!("ended" in first)) return first;
    const requestId = (requests[i] as DeliveryInput).requestId;
    return settled ? { settled: settled.get(requestId) ?? "failed" } : { verdicts: first.ended };
  });
}

/**
 * A request going on answers its verdicts; one its only attempt settled, how; one its first
 * attempts ended otherwise (several targets, or a rerun that found them delivered) is `ended`,
 * to settle with the batch's others in one go.
 */
function endedOrGoesOn(
  verdicts: (FirstAttempt | null)[],
): BatchedFirst | { ended: (FirstAttempt | null)[] } {
  if (verdicts.some(goesOn)) return { verdicts };
  const [verdict] = verdicts;
  if (verdict && "settled" in verdict && verdict.settled) return { settled: verdict.settled };
  return { ended: verdicts };
}

/** A request of a batch let go for some of its targets (./batch-holds.ts). */
export interface ReleasedInBatch {
  request: DeliveryInput;
  targetIds: string[];
  /** Of `targetIds`, those whose wait was for time (a retry, a busy share): not from the queue. */
  timed?: string[];
  /** An ordered request waiting in the batch for its turn: tried at every target in its turn. */
  inLane?: boolean;
}

/**
 * The attempts of a batch's requests let go by their limited targets' drains, due after a wait
 * for time, or waiting for their lanes' turns, as their first attempts were made: by target id in
 * the order asked; one that finds no room again is held again (`holdAgain`), keeping its place.
 */
export async function releasedAttemptsOfBatch(
  deps: BatchAttemptDeps & {
    holdAgain(held: { request: DeliveryInput; targetId: string }[]): Promise<void>;
  },
  project: string,
  carrier: string,
  released: ReleasedInBatch[],
): Promise<((FirstAttempt | null)[] | InLane)[]> {
  const outcomes = await attemptAll(
    deps,
    project,
    carrier,
    released.map(({ request, targetIds, timed = [], inLane = false }) => ({
      request,
      targetIds,
      fromQueue: (targetId: string) => !inLane && !timed.includes(targetId),
      waited: inLane,
    })),
  );
  const again = released.flatMap(({ request, targetIds }, i) => {
    const verdicts = outcomes[i];
    if (typeof verdicts === "string" || !verdicts) return [];
    return targetIds
      .filter((_, j) => isThrottled(verdicts[j]))
      .map((targetId) => ({ request, targetId }));
  });
  if (again.length > 0) await deps.holdAgain(again);
  return outcomes;
}

/** The project's share, as a batch takes it: a slot at once, or one freed for it in time. */
function waitingFor(slots: ProjectSlots, project: string, deadline: number): TakeSlot {
  return () => slots.takeWithin(project, deadline - performance.now());
}
