/**
 * A batch's requests whose first attempts left them waiting only for limited targets' room
 * (core/flow.ts) wait in the batch, held under its workflow id, rather than each as a workflow of
 * its own: under load, a workflow per waiting delivery cost the worker and Temporal more than the
 * target's limit let through. Each target's drain (./circuit.ts) lets them go to the batch, which
 * makes their attempts in one local activity per wake. A request that needs more (a retry, its
 * target's circuit or pause, a cancel) continues as its own workflow from its verdicts, as the
 * batch's others do (./batch.ts).
 */
import { condition, proxyLocalActivities, setHandler, workflowInfo } from "@temporalio/workflow";
import type { DeliveryInput } from "../core/delivery.ts";
import type { Activities } from "./activities.ts";
import {
  asyncDeliveries,
  type FirstAttempt,
  goesOn,
  isThrottled,
  targetIdsOf,
} from "./deliveries.ts";
import { handOnSignal, releaseSignal } from "./signals.ts";

/** A batch's request and its targets' verdicts so far, in its async targets' order. */
export interface InBatch {
  request: DeliveryInput;
  verdicts: (FirstAttempt | null)[];
}

/** How a batch lets a request leave it: settled (its verdicts all ended), or on its own. */
export type Leave = (request: InBatch) => Promise<void>;

/** Whether a request's first attempts left it waiting for limited targets' room and nothing else. */
export function waitsOnlyForRoom(verdicts: (FirstAttempt | null)[]): boolean {
  return verdicts.some(isThrottled) && verdicts.every((v) => isThrottled(v) || !goesOn(v));
}

/** How long a held delivery waits for its release before it is held again (as ./workflows.ts). */
const HOLD_RECHECK = "1 hour";
/** Past this many events the batch's history is long: what still waits goes on on its own. */
const LONG_HISTORY = 10_000;
/** Room beyond the slowest target's timeout for a slot's wait, the room's, and the log's writes. */
const ATTEMPT_SLACK_MS = 20_000;

export async function waitInBatch(project: string, held: InBatch[], leave: Leave): Promise<void> {
  const { workflowId } = workflowInfo();
  const released = new Set<string>();
  const handOn = new Set<string>();
  setHandler(releaseSignal, ({ targetId, requestId }) => {
    if (requestId) released.add(pair(requestId, targetId));
  });
  setHandler(handOnSignal, (requestId) => {
    handOn.add(requestId);
  });
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
  const holdAll = () =>
    bookkeeping.holdInBatch(workflowId, [...waiting].filter((w) => !busy.has(w)).flatMap(heldOf));

  /** Leaves the batch on its own: its deliveries held here wait in its own workflow. */
  const goAlone = async (request: InBatch) => {
    waiting.delete(request);
    await bookkeeping.forgetHeldInBatch(workflowId, [request.request.requestId]);
    await leave(request);
  };
  const attemptReleased = async (group: { request: InBatch; targetIds: string[] }[]) => {
    for (const { request } of group) busy.add(request);
    const verdicts = await local
      .releasedAttemptsOfBatch(
        project,
        workflowId,
        group.map(({ request, targetIds }) => ({ request: request.request, targetIds })),
      )
      .catch(() => group.map(({ targetIds }) => targetIds.map(() => null)));
    await Promise.all(
      group.map(async ({ request, targetIds }, i) => {
        busy.delete(request);
        const all = targetIdsOf(asyncDeliveries(request.request));
        targetIds.forEach((targetId, j) => {
          request.verdicts[all.indexOf(targetId)] = verdicts[i]?.[j] ?? null;
        });
        // A failed attempt (null) goes on on its own: its workflow tries again.
        if (!request.verdicts.some(isThrottled)) {
          waiting.delete(request);
          await leave(request);
        }
      }),
    );
  };

  await holdAll();
  const running: Promise<void>[] = [];
  while (waiting.size > 0) {
    const ready = () =>
      [...waiting].some(
        (w) =>
          !busy.has(w) &&
          (handOn.has(w.request.requestId) ||
            targetsOf(w).some((t) => released.has(pair(w.request.requestId, t)))),
      );
    if (!(await condition(() => ready() || waiting.size === 0, HOLD_RECHECK))) {
      await holdAll();
      continue;
    }
    const group: { request: InBatch; targetIds: string[] }[] = [];
    for (const w of [...waiting]) {
      if (busy.has(w)) continue;
      const { requestId } = w.request;
      if (handOn.has(requestId) || workflowInfo().historyLength > LONG_HISTORY) {
        running.push(goAlone(w));
        continue;
      }
      const targetIds = targetsOf(w).filter((t) => released.delete(pair(requestId, t)));
      if (targetIds.length > 0) group.push({ request: w, targetIds });
    }
    if (group.length > 0) running.push(attemptReleased(group));
  }
  await Promise.all(running);
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
