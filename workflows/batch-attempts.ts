/**
 * A batch's first attempts, all in one local activity: one marker in the batch's history rather
 * than one per request. Each request's targets are tried once, as a lone request's first task
 * tries them, and a request they ended is settled here; the rest continue as workflows of their
 * own (./batch.ts). An ordered request is tried only when it has its turn at every target, and
 * passes the turn on where its series ended; otherwise its own workflow waits for its turn.
 */
import type { DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import type { ProjectSlots, Release } from "../core/project-slots.ts";
import type { Turn } from "../store/lanes.ts";
import {
  asyncDeliveries,
  type BatchedFirst,
  type DeliverInput,
  type FirstAttempt,
  goesOn,
  isThrottled,
  type RequestRow,
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
  settle(requestId: string, targetIds: string[]): Promise<RequestStatus>;
  slots: ProjectSlots;
  /** Targets of these requests a 2xx was logged for ("request id, space, target id"): its status. */
  deliveredBefore(requestIds: string[]): Promise<Map<string, number>>;
  /** An ordered request's turns in its lane, and its leaving (store/lanes.ts). */
  lanes: {
    claim(laneId: string, requestId: string, targetIds: string[]): Promise<Record<string, Turn>>;
    leave(laneId: string, requestId: string, targetIds: string[]): Promise<void>;
  };
}

/**
 * How long a batch's attempts may wait for slots of their project's share: a batch is larger
 * than the share, and attempts at a target that answers at once free theirs in milliseconds;
 * past this (a slow target), a request waits as a busy one does, on a timer of its own.
 */
const SLOT_WAIT_MS = 5000;

export async function firstAttemptsOfBatch(
  deps: BatchAttemptDeps,
  project: string,
  requests: DeliveryInput[],
): Promise<BatchedFirst[]> {
  // This activity run again (its workflow task lost with its worker) delivers nothing twice.
  const delivered = await deps.deliveredBefore(requests.map((r) => r.requestId));
  const takeSlot = waitingFor(deps.slots, project, performance.now() + SLOT_WAIT_MS);
  return Promise.all(requests.map((input) => firstAttemptsOf(deps, input, takeSlot, delivered)));
}

async function firstAttemptsOf(
  deps: BatchAttemptDeps,
  input: DeliveryInput,
  takeSlot: TakeSlot,
  deliveredBefore: Map<string, number>,
): Promise<BatchedFirst> {
  const { targets, headers, bodyBase64, body, ...request } = input;
  const deliveries = asyncDeliveries(input);
  const targetIds = targetIdsOf(deliveries);
  const lane = input.ordering;
  if (lane) {
    // Not its turn at every target: its own workflow waits for it (../workflows/lanes.ts).
    const turns = await deps.lanes.claim(lane.laneId, input.requestId, targetIds);
    if (targetIds.some((id) => turns[id] !== "turn"))
      return { verdicts: targetIds.map(() => null) };
  }
  const only = deliveries.length === 1;
  const verdicts = await Promise.all(
    deliveries.map(
      (delivery): Promise<FirstAttempt | null> =>
        deliveredAlready(deliveredBefore, delivery) ??
        deps.attempt(request, delivery, only, takeSlot).catch(() => null),
    ),
  );
  if (lane) {
    // A target whose series ended here passes its turn on; the others keep it, going on alone.
    const ended = targetIds.filter((_, i) => !goesOn(verdicts[i]));
    if (ended.length > 0) await deps.lanes.leave(lane.laneId, input.requestId, ended);
  }
  if (verdicts.some(goesOn)) return { verdicts };
  const [verdict] = verdicts;
  if (verdict && "settled" in verdict && verdict.settled) return { settled: verdict.settled };
  // Not settled here (the log refused the write): its own workflow settles it.
  return deps.settle(input.requestId, targetIdsOf(deliveries)).then(
    (settled) => ({ settled }),
    () => ({ verdicts }),
  );
}

/** A request of a batch let go for some of its targets (./batch-holds.ts). */
export interface ReleasedInBatch {
  request: DeliveryInput;
  targetIds: string[];
  /** Of `targetIds`, those whose wait was for time (a retry, a busy share): not from the queue. */
  timed?: string[];
}

/**
 * The attempts of a batch's requests let go by their limited targets' drains, or due after a
 * wait for time, as their first attempts were made: by target id in the order asked; one that
 * finds no room again is held again (`holdAgain`), keeping its place.
 */
export async function releasedAttemptsOfBatch(
  deps: BatchAttemptDeps & {
    holdAgain(held: { request: DeliveryInput; targetId: string }[]): Promise<void>;
  },
  project: string,
  released: ReleasedInBatch[],
): Promise<(FirstAttempt | null)[][]> {
  // As first attempts: this activity run again delivers nothing twice.
  const delivered = await deps.deliveredBefore(released.map((r) => r.request.requestId));
  const takeSlot = waitingFor(deps.slots, project, performance.now() + SLOT_WAIT_MS);
  return Promise.all(
    released.map(async ({ request, targetIds, timed = [] }) => {
      const { targets, headers, bodyBase64, body, ...row } = request;
      const deliveries = asyncDeliveries(request);
      const only = deliveries.length === 1;
      const verdicts = await Promise.all(
        targetIds.map(async (targetId) => {
          const delivery = deliveries.find((d) => d.target.id === targetId);
          if (!delivery) return null;
          const asked = timed.includes(targetId) ? delivery : { ...delivery, fromQueue: true };
          return (
            deliveredAlready(delivered, delivery) ??
            deps.attempt(row, asked, only, takeSlot).catch((): FirstAttempt | null => null)
          );
        }),
      );
      const again = targetIds.filter((_, i) => isThrottled(verdicts[i]));
      if (again.length > 0) await deps.holdAgain(again.map((targetId) => ({ request, targetId })));
      return verdicts;
    }),
  );
}

/** The verdict of a delivery the log shows delivered (`deliveredBefore`), else undefined. */
function deliveredAlready(
  delivered: Map<string, number>,
  { requestId, target }: DeliverInput,
): Promise<FirstAttempt> | undefined {
  const status = delivered.get(`${requestId} ${target.id}`);
  return status === undefined ? undefined : Promise.resolve({ kind: "delivered", status });
}

/** The project's share, as a batch takes it: a slot at once, or one freed for it in time. */
function waitingFor(slots: ProjectSlots, project: string, deadline: number): TakeSlot {
  return () => slots.takeWithin(project, deadline - performance.now());
}
