/**
 * What aborts a batch's attempt at a target. A batch's local activity is never a request's to
 * cancel (a cancel reaches a batched request once it goes on as its own workflow), so its
 * CANCELLED is its run evicted from the worker's cache: the SDK cancels an evicted run's local
 * activities, as when Temporal's server, slow to take a workflow task, gives it to the worker
 * again. Aborted then, a call the target took would be logged without its answer and made again;
 * left to end, its outcome is logged, and the run again finds it (./first-attempts-in-flight.ts,
 * or the log). A timeout or the worker's shutdown still aborts it.
 */
import { CancelledFailure } from "@temporalio/common";

/**
 * Follows `signal` (the activity's), but for its run's eviction: one follower per activity, which
 * its attempts share, rather than one more controller and listener per attempt.
 */
export function abortedUnlessEvicted(signal: AbortSignal): AbortSignal {
  let follower = followers.get(signal);
  if (!follower) {
    follower = following(signal);
    followers.set(signal, follower);
  }
  return follower;
}

const followers = new WeakMap<AbortSignal, AbortSignal>();

function following(signal: AbortSignal): AbortSignal {
  const controller = new AbortController();
  const follow = () => {
    const evicted =
      signal.reason instanceof CancelledFailure && signal.reason.message === "CANCELLED";
    if (!evicted) controller.abort(signal.reason);
  };
  if (signal.aborted) follow();
  else signal.addEventListener("abort", follow, { once: true });
  return controller.signal;
}
