/**
 * The sender of operational notifications: posts an event to its project's notification URL,
 * signed with the project's secret, through the worker's checked and pinned connection to
 * targets (so the URL's address is checked where it connects, and no redirect is followed).
 * A failure throws, and Temporal retries it; the event's id stays the `webhook-id` throughout.
 */
import {
  NOTIFICATION_TIMEOUT_MS,
  type NotificationEvent,
  notificationRequest,
} from "../core/notifications.ts";
import { importSigningKey } from "../core/signing.ts";
import { targetFailure } from "../core/target-call.ts";
import type { CallTarget, TargetAnswer } from "../core/target-request.ts";
import type { Sql } from "../store/db.ts";
import { notificationTarget } from "../store/notifications.ts";

export interface NotifierDeps {
  sql: Sql;
  sealingKey: CryptoKey;
  /** The worker's connection to targets (`targetCaller` over its `targetDispatcher`). */
  callTarget: CallTarget;
  /** The stack's clock, which signs (the dev clock's, under tests). */
  now: () => Promise<Date>;
}

/**
 * Sends one event: "none" when its project set no URL, "sent" when the URL answered 2xx. Any
 * other answer, a timeout or no answer throws an Error whose message names what happened,
 * never the secret. The secret is read at each try, so a retry after a rotation signs anew.
 */
export function notifier(
  deps: NotifierDeps,
): (event: NotificationEvent) => Promise<"sent" | "none"> {
  return async (event) => {
    const target = await notificationTarget(deps.sql, deps.sealingKey, event.project);
    if (!target) return "none";
    const key = await importSigningKey(target.key);
    const timeout = AbortSignal.timeout(NOTIFICATION_TIMEOUT_MS);
    // Only the status counts: the answer's body is dropped unread, and its connection with it.
    const drop = new AbortController();
    const init = await notificationRequest(
      event,
      key,
      await deps.now(),
      AbortSignal.any([timeout, drop.signal]),
    );
    let answer: TargetAnswer;
    try {
      answer = await deps.callTarget(target.url, init);
    } catch (error) {
      const failure = targetFailure(error, timeout.aborted);
      throw new Error(`notification ${failure.kind}: ${failure.message}`);
    } finally {
      drop.abort(new DOMException("the answer's body is not read", "AbortError"));
    }
    if (answer.status >= 200 && answer.status < 300) return "sent";
    throw new Error(`notification URL answered ${answer.status}`);
  };
}
