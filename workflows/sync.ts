/** relaySync: one per sync call; the edge waits for its result (the target's own answer). */
import { proxyLocalActivities } from "@temporalio/workflow";
import { type SyncInput, type SyncOutcome, syncStatus } from "../core/delivery.ts";
import type { Activities } from "./activities.ts";
import { setStatus } from "./status.ts";

/** Sync calls are never retried; the target's own timeout bounds the activity. */
const { relaySyncCall } = proxyLocalActivities<Activities>({
  startToCloseTimeout: "100 seconds",
  retry: { maximumAttempts: 1 },
});

export async function relaySync(input: SyncInput): Promise<SyncOutcome> {
  const outcome = await relaySyncCall(input);
  if (input.ownsStatus) setStatus(syncStatus(outcome));
  return outcome;
}
