/**
 * A batch's first attempts, all in one local activity: one marker in the batch's history rather
 * than one per request. Each request's targets are tried once, as a lone request's first task
 * tries them, and a request they ended is settled here; the rest continue as workflows of their
 * own (./batch.ts).
 */
import type { DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import type { ProjectSlots, Release } from "../core/project-slots.ts";
import type { DeliverInput, FirstAttempt, RequestRow } from "./activities.ts";
import { asyncDeliveries, type BatchedFirst, goesOn, targetIdsOf } from "./deliveries.ts";

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
}

/**
 * How long a batched attempt may wait for a slot that the batch's own attempts hold: a batch is
 * larger than a project's share, and attempts at a target that answers at once free theirs in
 * milliseconds; past this (a slow target), the request waits as a busy one does, on its own.
 */
const SLOT_WAIT_MS = 1000;

export function firstAttemptsOfBatch(
  deps: BatchAttemptDeps,
  project: string,
  requests: DeliveryInput[],
): Promise<BatchedFirst[]> {
  const takeSlot = queuedBehindOwn(deps.slots, project, SLOT_WAIT_MS);
  return Promise.all(requests.map((input) => firstAttemptsOf(deps, input, takeSlot)));
}

async function firstAttemptsOf(
  deps: BatchAttemptDeps,
  input: DeliveryInput,
  takeSlot: TakeSlot,
): Promise<BatchedFirst> {
  const { targets, headers, bodyBase64, body, ...request } = input;
  const deliveries = asyncDeliveries(input);
  const only = deliveries.length === 1;
  const verdicts = await Promise.all(
    deliveries.map((delivery) =>
      deps.attempt(request, delivery, only, takeSlot).catch((): FirstAttempt | null => null),
    ),
  );
  if (verdicts.some(goesOn)) return { verdicts };
  const [verdict] = verdicts;
  if (verdict && "settled" in verdict && verdict.settled) return { settled: verdict.settled };
  // Not settled here (the log refused the write): its own workflow settles it.
  return deps.settle(input.requestId, targetIdsOf(deliveries)).then(
    (settled) => ({ settled }),
    () => ({ verdicts }),
  );
}

/**
 * The project's share, as a batch takes it: a slot at once when one is free; else, while the
 * batch's own attempts hold some, the next one they free, for `waitMs` at most. Slots that other
 * workflows of the project hold are not waited for: then the share is full (busy).
 */
function queuedBehindOwn(slots: ProjectSlots, project: string, waitMs: number): TakeSlot {
  let own = 0;
  let wake = () => {};
  let freed = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const deadline = performance.now() + waitMs;
  const taken = (release: Release): Release => {
    own++;
    return () => {
      release();
      own--;
      const woken = wake;
      freed = new Promise<void>((resolve) => {
        wake = resolve;
      });
      woken();
    };
  };
  return async function takeSlot() {
    for (;;) {
      const release = slots.take(project);
      if (release) return taken(release);
      const left = deadline - performance.now();
      if (own === 0 || left <= 0) return null;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        freed,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, left);
        }),
      ]);
      clearTimeout(timer);
    }
  };
}
