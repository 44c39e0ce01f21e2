/**
 * Operational notifications: events about a project's deliveries, posted to the URL the project
 * set, signed the Standard Webhooks way (standardwebhooks.com) with the project's own `whsec_`
 * secret, as deliveries are signed with their endpoint's. The payload is the spec's recommended
 * shape, `{type, timestamp, data}`, so a receiver's Standard Webhooks library reads it as is.
 */
import { type Hmac, webhookHeaders } from "./signing.ts";
import type { TargetInit } from "./target-request.ts";

export const notificationTypes = [
  "target.circuit_opened",
  "target.recovered",
  "target.disabled",
  "request.failed",
] as const;

export type NotificationType = (typeof notificationTypes)[number];

export interface NotificationEvent {
  /** Unique per event and stable across retries of its sending: the `webhook-id`. */
  id: string;
  type: NotificationType;
  /** The project's slug. */
  project: string;
  /** When it happened, RFC 3339. */
  at: string;
  /** What it is about: for target events {line, endpoint, target: {id, name}, ...}; for request.failed {requestId, line, endpoint, status, targets: [...]} */
  data: Record<string, unknown>;
}

/** How long a notification URL has to answer before the sending counts as failed. */
export const NOTIFICATION_TIMEOUT_MS = 10_000;

/**
 * The JSON body sent: `{type, timestamp, data}` with the project in `data`. The project is set
 * last, so an event's data can never name another project.
 */
export function notificationBody(event: NotificationEvent): string {
  return JSON.stringify({
    type: event.type,
    timestamp: event.at,
    data: { ...event.data, project: event.project },
  });
}

/**
 * The fetch init that posts `event`, signed at `signedAt` with the project's key. As a delivery,
 * it follows no redirect: a Location was never checked against the target rules.
 */
export async function notificationRequest(
  event: NotificationEvent,
  key: CryptoKey,
  signedAt: Date,
  signal: AbortSignal,
  hmac?: Hmac,
): Promise<TargetInit> {
  const body = new TextEncoder().encode(notificationBody(event));
  const signature = await webhookHeaders(
    [{ key, expiresAt: null }],
    event.id,
    signedAt,
    body,
    hmac,
  );
  return {
    method: "POST",
    headers: new Headers({ "content-type": "application/json", ...signature }),
    body,
    redirect: "manual",
    signal,
  };
}
