/** RelayError at the control plane's two doors: the REST JSON body and Connect's error codes. */
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { type ErrorCode, RelayError } from "../core/errors.ts";
import { ErrorInfoSchema } from "../gen/relay/v1/errors_pb.ts";
import { isRefusedValue } from "../store/errors.ts";
import { log } from "./observability.ts";

const connectCodes: Partial<Record<ErrorCode, Code>> = {
  bad_request: Code.InvalidArgument,
  validation_failed: Code.InvalidArgument,
  idempotency_key_reused: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  invalid_or_missing_key: Code.Unauthenticated,
  key_revoked: Code.Unauthenticated,
  key_expired: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  policy_violation: Code.PermissionDenied,
  ip_not_allowed: Code.PermissionDenied,
  not_found: Code.NotFound,
  conflict: Code.AlreadyExists,
  key_not_active: Code.FailedPrecondition,
  request_already_delivered: Code.FailedPrecondition,
  successor_already_revealed: Code.FailedPrecondition,
  insufficient_credits: Code.ResourceExhausted,
  limit_exceeded: Code.ResourceExhausted,
  rate_limited: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  request_timeout: Code.DeadlineExceeded,
};

/** The Relay error code travels in this header, so Connect clients can branch on it too. */
export const ERROR_CODE_HEADER = "relay-error-code";

/**
 * The database refuses some values the API's own checks let through (a NUL inside a string,
 * which text cannot hold): those are the caller's input, so a 400. Anything else unknown stays
 * `internal`.
 */
function relayErrorOf(cause: unknown): RelayError {
  if (isRefusedValue(cause)) {
    return new RelayError("bad_request", "a value in this request cannot be stored");
  }
  return RelayError.from(cause);
}

export function toConnectError(cause: unknown): ConnectError {
  if (cause instanceof ConnectError) return cause;
  const error = relayErrorOf(cause);
  if (error.code === "internal") log.error({ err: cause }, "internal error");
  // The same code and per-field details as the REST body, as a typed error detail, so a client
  // (the panel) can show each message next to its field.
  const info = { desc: ErrorInfoSchema, value: { code: error.code, details: error.details ?? [] } };
  return new ConnectError(
    error.message,
    connectCodes[error.code] ?? Code.Internal,
    { [ERROR_CODE_HEADER]: error.code },
    [info],
  );
}

/** REST: the status and the JSON body of docs/design.md. */
export function toHttpError(cause: unknown): { status: number; body: string } {
  const error = relayErrorOf(cause);
  if (error.code === "internal") log.error({ err: cause }, "internal error");
  return { status: error.status, body: JSON.stringify(error.toBody()) };
}

/**
 * connect-es answers a request body that is not the method's protobuf with `internal` (HTTP
 * 500) before any interceptor runs; connect-go calls it `invalid_argument`, and so does Relay:
 * the fault is the caller's. Only the Connect protocol's unary answer carries an HTTP status
 * (gRPC answers 200 with grpc-status 13, as grpc-go does), so only that answer is rewritten.
 */
export function malformedMessageIsInvalidArgument(handler: UniversalHandler): UniversalHandler {
  const rewritten = async (request: Parameters<UniversalHandler>[0]) => {
    const response = await handler(request);
    if (response.status !== 500 || !response.body) return response;
    const chunks: Uint8Array[] = [];
    for await (const chunk of response.body) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const error = parsedConnectError(body);
    if (error?.code !== "internal" || !error.message?.startsWith("parse binary:")) {
      return { ...response, body: single(body) };
    }
    const answer = { code: "invalid_argument", message: `malformed request: ${error.message}` };
    const header = new Headers(response.header);
    header.delete("content-length");
    return { ...response, status: 400, header, body: single(Buffer.from(JSON.stringify(answer))) };
  };
  return Object.assign(rewritten, handler);
}

function parsedConnectError(body: Uint8Array): { code?: string; message?: string } | null {
  try {
    return JSON.parse(Buffer.from(body).toString("utf8"));
  } catch {
    return null;
  }
}

async function* single(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
