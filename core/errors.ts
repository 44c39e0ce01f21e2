/**
 * The one error type of every Relay boundary. Each code has one HTTP status; the edge, the REST
 * API and the Connect services all answer with `{"error": {"code", "message", "details"?}}`.
 */
export const errorStatus = {
  bad_request: 400,
  invalid_or_missing_key: 401,
  key_revoked: 401,
  key_expired: 401,
  unauthenticated: 401,
  insufficient_credits: 402,
  forbidden: 403,
  policy_violation: 403,
  ip_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  key_not_active: 409,
  request_already_delivered: 409,
  /** A documented per-project cap (docs/security.md "Limits"), named in the message. */
  limit_exceeded: 409,
  successor_already_revealed: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal: 500,
  target_unreachable: 502,
  /** A sync or stream target's transformation failed (core/transform.ts): it was not called. */
  transform_failed: 502,
  unavailable: 503,
  target_timeout: 504,
  loop_detected: 508,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export interface ErrorDetail {
  path: string;
  message: string;
}

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetail[] };
}

export class RelayError extends Error {
  override readonly name = "RelayError";

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }

  get status(): number {
    return errorStatus[this.code];
  }

  toBody(): ErrorBody {
    const error: ErrorBody["error"] = { code: this.code, message: this.message };
    if (this.details) error.details = this.details;
    return { error };
  }

  /** Anything thrown becomes a RelayError; unknown failures are `internal` and say nothing more. */
  static from(cause: unknown): RelayError {
    return cause instanceof RelayError ? cause : new RelayError("internal", "internal error");
  }
}

/** A call Relay could not hand on (a store or Temporal did not take it): 503, to try again. */
export const notQueued = () =>
  new RelayError("unavailable", "the request could not be queued; try again");

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(errorStatus, value);
}
