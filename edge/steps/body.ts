import { RelayError } from "../../core/errors.ts";
import type { Received, Routed, Step, With } from "../pipeline.ts";

/** The whole body, at most `limit` bytes (413) arriving within `timeoutMs` (408). */
export function body(
  limit: number,
  timeoutMs: number,
): Step<Routed & With<"idempotencyKey">, Received> {
  return async function body(envelope, next) {
    const read = await readBody(envelope.request, limit, timeoutMs);
    return next(Object.assign(envelope, { body: read }));
  };
}

/** Reads at most `limit` bytes within `timeoutMs`; refuses a longer or slower body early. */
async function readBody(
  request: Request,
  limit: number,
  timeoutMs: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RelayError("request_timeout", "the body did not arrive in time")),
      timeoutMs,
    );
  });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), timedOut]);
      if (done) break;
      size += value.byteLength;
      if (size > limit) throw tooLarge(limit);
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

function tooLarge(limit: number): RelayError {
  return new RelayError("payload_too_large", `the body exceeds ${limit} bytes`);
}
