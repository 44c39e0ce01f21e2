/**
 * Completion callbacks: a caller's `Relay-Callback` and `Relay-Failure-Callback` URLs on an async
 * call, told how each target's delivery ended (delivered; failed for good), with the target's
 * answer. The body is the Standard Webhooks shape (`{type, timestamp, data}`) signed with the
 * endpoint's secret, so the caller verifies it as a target verifies a delivery; its `webhook-id`
 * is stable per request, target and run, for the caller to deduplicate on.
 */
import { MAX_TARGET_URL_LENGTH, type SavedTargetRules, targetUrlProblem } from "./targets.ts";

export const CALLBACK_HEADER = "relay-callback";
export const FAILURE_CALLBACK_HEADER = "relay-failure-callback";

/** Where to tell a call's ends: `delivered` for a target that got it, `failed` for one that never will. */
export interface Callbacks {
  delivered?: string;
  failed?: string;
}

/**
 * The call's callbacks from its headers, each checked as a target's URL is (null when it has
 * none), or the problem to answer 400 with.
 */
export function callbacksOf(
  headers: Headers,
  rules: SavedTargetRules,
): { callbacks: Callbacks | null } | { problem: string } {
  const callbacks: Callbacks = {};
  for (const [kind, name, header] of [
    ["delivered", CALLBACK_HEADER, "Relay-Callback"],
    ["failed", FAILURE_CALLBACK_HEADER, "Relay-Failure-Callback"],
  ] as const) {
    const url = headers.get(name);
    if (url === null) continue;
    const problem =
      url.length > MAX_TARGET_URL_LENGTH
        ? `is longer than ${MAX_TARGET_URL_LENGTH} characters`
        : targetUrlProblem(url, rules);
    if (problem) return { problem: `${header} ${problem}` };
    callbacks[kind] = url;
  }
  return { callbacks: callbacks.delivered || callbacks.failed ? callbacks : null };
}

/** One target's callback in one run: the call's (replay 0) or a replay's. */
export interface CallbackJob {
  project: string;
  requestId: string;
  replay: number;
  targetId: string;
  callbacks: Callbacks;
}

/** The `webhook-id` of a target's callback in a run: the same on every retry. */
export const callbackId = (job: CallbackJob) =>
  `callback_${job.requestId}_${job.targetId}_${job.replay}`;

/**
 * What a callback posts: `{type, timestamp, data}`, `data` being how the target's delivery ended
 * (store/callbacks.ts `DeliveryEnd`), its project set last.
 */
export function callbackBody(
  project: string,
  end: { status: "delivered" | "failed" },
  at: Date,
): string {
  return JSON.stringify({
    type: end.status === "delivered" ? "delivery.succeeded" : "delivery.failed",
    timestamp: at.toISOString(),
    data: { ...end, project },
  });
}
