import { RelayError } from "../../core/errors.ts";
import { readCapped, TOO_LARGE } from "../../core/read-capped.ts";
import type { InboundRequest, Received, Routed, Step, With } from "../pipeline.ts";

/** The whole body, at most `limit` bytes (413) arriving within `timeoutMs` (408). */
export function body(
  limit: number,
  timeoutMs: number,
): Step<Routed & With<"idempotencyKey" | "notBefore" | "callbacks">, Received> {
  return async function body(envelope, next) {
    const read = await readBody(envelope.request, limit, timeoutMs);
    return next(Object.assign(envelope, { body: read }));
  };
}

/** Reads at most `limit` bytes within `timeoutMs`; refuses a longer or slower body early. */
async function readBody(
  request: InboundRequest,
  limit: number,
  timeoutMs: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new RelayError("request_timeout", "the body did not arrive in time")),
    timeoutMs,
  );
  try {
    const read = await readCapped(request.body, limit, deadline.signal);
    if (read === TOO_LARGE) throw tooLarge(limit);
    return read;
  } finally {
    clearTimeout(timer);
  }
}

function tooLarge(limit: number): RelayError {
  return new RelayError("payload_too_large", `the body exceeds ${limit} bytes`);
}
