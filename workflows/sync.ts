/**
 * relaySync: one per sync call an edge starts; the edge waits for its result (the target's own
 * answer). relaySyncBatch: sync calls a worker's listener gathered (./sync-calls.ts); each
 * answer goes to its listener in that worker, so the workflow returns only what became of each.
 */
import { proxyLocalActivities } from "@temporalio/workflow";
import { type SyncInput, type SyncOutcome, syncStatus } from "../core/delivery.ts";
import type { Activities } from "./activities.ts";
import { setStatus } from "./status.ts";
import type { SyncReceipt } from "./sync-answers.ts";

/** Sync calls are never retried; the target's own timeout bounds the activity. */
const { relaySyncCall, relaySyncCallsHere } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "100 seconds",
  retry: { maximumAttempts: 1 },
});

export async function relaySync(input: SyncInput): Promise<SyncOutcome> {
  const outcome = await relaySyncCall(input);
  if (input.ownsStatus) setStatus(syncStatus(outcome));
  return outcome;
}

export function relaySyncBatch(calls: SyncInput[]): Promise<SyncReceipt[]> {
  return relaySyncCallsHere(calls);
}
