/**
 * What the edge hands the delivery workflow, and how a target's answer is classified. Plain JSON
 * only: it crosses Temporal's HTTP API and the workflow sandbox.
 */
import type { DeliveryMode, KeyMode } from "./model.ts";

export interface DeliveryTarget {
  id: string;
  name: string;
  targetUrl: string;
  deliveryMode: DeliveryMode;
  timeoutSeconds: number;
  headers: Record<string, string>;
}

export interface DeliveryInput {
  requestId: string;
  project: string;
  line: string;
  endpoint: string;
  keyMode: KeyMode;
  receivedAt: string;
  /** Caller headers safe to pass on (never Authorization). */
  headers: Record<string, string>;
  body: string;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  targets: DeliveryTarget[];
}

/** Statuses worth another attempt: the target may answer differently later. */
const RETRYABLE_STATUSES = new Set([408, 425, 429]);

export type AttemptOutcome = "delivered" | "retry" | "failed";

export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return "delivered";
  if (RETRYABLE_STATUSES.has(status) || status >= 500) return "retry";
  return "failed";
}

/** `Retry-After` as seconds or an HTTP date, in milliseconds from `now`; null when absent or bad. */
export function retryAfterMs(header: string | null, now: Date): number | null {
  if (!header) return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now.getTime());
}
