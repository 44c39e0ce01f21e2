/**
 * The token bucket behind each endpoint's rate limit: `burst` tokens, refilled at
 * `requestsPerSecond`. Pure, on an injected clock; the edge keeps one bucket per endpoint.
 */
import type { RateLimit } from "./model.ts";

export interface Bucket {
  tokens: number;
  updatedAtMs: number;
}

export interface RateDecision {
  allowed: boolean;
  bucket: Bucket;
  /** RateLimit-Limit */
  limit: number;
  /** RateLimit-Remaining: whole tokens left after this call. */
  remaining: number;
  /** RateLimit-Reset: seconds until the bucket is full again. */
  resetSeconds: number;
  /** Retry-After on a refusal: seconds until one token is back. */
  retryAfterSeconds: number;
}

export function takeToken(
  bucket: Bucket | undefined,
  limit: RateLimit,
  nowMs: number,
): RateDecision {
  const previous = bucket ?? { tokens: limit.burst, updatedAtMs: nowMs };
  const elapsedSeconds = Math.max(0, nowMs - previous.updatedAtMs) / 1000;
  const available = Math.min(
    limit.burst,
    previous.tokens + elapsedSeconds * limit.requestsPerSecond,
  );
  const allowed = available >= 1;
  const tokens = allowed ? available - 1 : available;
  return {
    allowed,
    bucket: { tokens, updatedAtMs: nowMs },
    limit: limit.burst,
    remaining: Math.floor(tokens),
    resetSeconds: Math.ceil((limit.burst - tokens) / limit.requestsPerSecond),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / limit.requestsPerSecond)),
  };
}
