/**
 * A delayed request's wait for its time (`Relay-Delay`), in its own workflow or in its batch: the
 * edge batches delayed calls due in the same second (edge/batcher.ts), and the batch waits for
 * the last one's time, its requests opened in the log as scheduled first, as a lone one's are.
 */
import { condition, proxyLocalActivities, setHandler, workflowInfo } from "@temporalio/workflow";
import type { DeliveryInput } from "../core/delivery.ts";
import type { Activities } from "./activities.ts";
import { handOnSignal } from "./signals.ts";

const { openScheduled } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "10 seconds",
  retry: { maximumInterval: "1 minute" },
});

/** A delayed request its batch handed on: the wait it had left then. */
export interface WaitLeft {
  waitLeftMs?: number;
}

/**
 * How long a delayed request still waits: the delay it asked for at the edge (both times on the
 * stack's clock), less what has passed since its workflow started (Temporal's clock); for one
 * its batch handed on, what was left then, less what has passed since.
 */
export function timeToWait({ notBefore, receivedAt, waitLeftMs }: DeliveryInput & WaitLeft) {
  if (!notBefore) return 0;
  const asked = waitLeftMs ?? Date.parse(notBefore) - Date.parse(receivedAt);
  return asked - (Date.now() - workflowInfo().startTime.getTime());
}

/**
 * Waits in the batch until its requests' time (the latest of them: they are due within a second
 * of each other), once they are opened in the log as scheduled. A cancel of one asks the batch to
 * hand it on (the `handOn` signal, as ./batch-holds.ts answers it): it goes on as its own
 * workflow (`goAlone`) with the wait it has left, to be cancelled there. Answers the requests
 * still in the batch, now due; at once, when none waits.
 */
export async function waitForTheirTime(
  requests: DeliveryInput[],
  goAlone: (request: DeliveryInput, waitLeftMs: number) => Promise<void>,
): Promise<DeliveryInput[]> {
  const waitMs = Math.max(0, ...requests.map((request) => timeToWait(request)));
  if (waitMs === 0) return requests;
  await openScheduled(requests);
  const handOn = new Set<string>();
  setHandler(handOnSignal, (requestId) => {
    handOn.add(requestId);
  });
  const due = Date.now() + waitMs;
  const waiting = new Set(requests);
  const asked = () => [...waiting].filter((request) => handOn.has(request.requestId));
  while (Date.now() < due && (await condition(() => asked().length > 0, due - Date.now()))) {
    for (const request of asked()) {
      waiting.delete(request);
      await goAlone(request, due - Date.now());
    }
  }
  // Signals from here on wait for the batch's holds (./batch-holds.ts), as without a delay.
  setHandler(handOnSignal, undefined);
  return [...waiting];
}
