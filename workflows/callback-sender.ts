/**
 * The sender of completion callbacks (core/callbacks.ts): posts how a target's delivery ended to
 * the URL its caller gave for that end, signed with the endpoint's secret, through the worker's
 * checked and pinned connection to targets (the URL's address is checked where it connects, and
 * no redirect is followed). It is a delivery: charged once when the URL answers (the ledger's
 * `callback:{target}` entry), retried by Temporal on any other outcome with the same `webhook-id`.
 * Each try is logged (store/callbacks.ts), for the request's page.
 */
import { type CallbackJob, type Callbacks, callbackBody, callbackId } from "../core/callbacks.ts";
import { NOTIFICATION_TIMEOUT_MS } from "../core/notifications.ts";
import { type SigningKey, webhookHeaders } from "../core/signing.ts";
import { targetFailure } from "../core/target-call.ts";
import type { CallTarget, TargetAnswer } from "../core/target-request.ts";
import { deliveryEnd, logCallbackTry } from "../store/callbacks.ts";
import { chargeDelivery } from "../store/credits.ts";
import type { Sql } from "../store/db.ts";

export interface CallbackDeps {
  sql: Sql;
  callTarget: CallTarget;
  now: () => Promise<Date>;
  /** The keys that sign for a target's endpoint at a time (none once it is gone). */
  signingKeysOf: (targetId: string, at: Date) => Promise<SigningKey[]>;
}

/**
 * Sends one target's callback: "none" when its run made no attempt there, the caller gave no URL
 * for that end, or the endpoint is gone; "sent" when the URL answered 2xx. Any other answer, a
 * timeout or no answer throws, naming what happened.
 */
export function callbackSender(deps: CallbackDeps): (job: CallbackJob) => Promise<"sent" | "none"> {
  return async (job) => {
    const { targetId } = job;
    const end = await deliveryEnd(deps.sql, job.requestId, targetId, job.replay);
    const url = end && urlFor(job.callbacks, end.status);
    if (!end || !url) return "none";
    const at = await deps.now();
    const keys = await deps.signingKeysOf(targetId, at);
    if (keys.length === 0) return "none";
    const { keyMode, ...told } = end;
    const body = new TextEncoder().encode(callbackBody(job.project, told, at));
    const signature = await webhookHeaders(keys, callbackId(job), at, body);
    const timeout = AbortSignal.timeout(NOTIFICATION_TIMEOUT_MS);
    // Only the status counts: the answer's body is dropped unread, and its connection with it.
    const drop = new AbortController();
    const tried = { ...job, kind: end.status, url };
    let answer: TargetAnswer;
    try {
      answer = await deps.callTarget(url, {
        method: "POST",
        headers: new Headers({ "content-type": "application/json", ...signature }),
        body,
        redirect: "manual",
        signal: AbortSignal.any([timeout, drop.signal]),
      });
    } catch (error) {
      const failure = targetFailure(error, timeout.aborted);
      const message = `callback ${failure.kind}: ${failure.message}`;
      await logCallbackTry(deps.sql, { ...tried, statusCode: null, error: message }, at);
      throw new Error(message);
    } finally {
      drop.abort(new DOMException("the answer's body is not read", "AbortError"));
    }
    const { status } = answer;
    await deps.sql.begin(async (tx) => {
      await logCallbackTry(tx, { ...tried, statusCode: status, error: null }, at);
      await chargeDelivery(tx, {
        project: job.project,
        pool: keyMode,
        requestId: job.requestId,
        targetId: `callback:${targetId}`,
        bytes: body.byteLength,
        replay: job.replay,
      });
    });
    if (status >= 200 && status < 300) return "sent";
    throw new Error(`callback URL answered ${status}`);
  };
}

const urlFor = (callbacks: Callbacks, status: "delivered" | "failed") =>
  status === "delivered" ? callbacks.delivered : callbacks.failed;
