/**
 * Reading a body up to a byte limit, for whoever must not hold more of a stranger's bytes than
 * it allows (the edge's inbound bodies, the control plane's REST bodies, a sync target's answer).
 * Web-standard streams only: the edge runs on Deno too.
 */

/** What `readCapped` answers for a body past its limit. */
export const TOO_LARGE = "too_large" as const;

/**
 * The whole body when it is at most `limit` bytes; TOO_LARGE as soon as it passes the limit,
 * the rest left unread and the stream cancelled. An abort of `signal` (a deadline) cancels the
 * stream too and rejects with the signal's reason, as does a stream that fails.
 */
export async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
  signal?: AbortSignal,
): Promise<Uint8Array<ArrayBuffer> | typeof TOO_LARGE> {
  if (!body) return new Uint8Array();
  const reader = body.getReader();
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal?.reason);
  });
  signal?.addEventListener("abort", onAbort, { once: true });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    signal?.throwIfAborted();
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => {});
        return TOO_LARGE;
      }
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => {});
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}
