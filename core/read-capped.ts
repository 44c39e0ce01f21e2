/**
 * Reading a body up to a byte limit, for whoever must not hold more of a stranger's bytes than
 * it allows (the edge's inbound bodies, the control plane's REST bodies, a sync target's answer).
 * Web-standard streams or any async iterable of chunks (a target's answer as `CallTarget`
 * gives it): the edge runs on Deno too.
 */

/** What `readCapped` answers for a body past its limit. */
export const TOO_LARGE = "too_large" as const;

/** A body to read: a web stream, or chunks as an async iterable. */
export type Chunks = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/**
 * The whole body when it is at most `limit` bytes; TOO_LARGE as soon as it passes the limit,
 * the rest left unread and the body cancelled. An abort of `signal` (a deadline) cancels the
 * body too and rejects with the signal's reason, as does a body that fails.
 */
export async function readCapped(
  body: Chunks | null,
  limit: number,
  signal?: AbortSignal,
): Promise<Uint8Array<ArrayBuffer> | typeof TOO_LARGE> {
  const read = await readFirst(body, limit, signal);
  return read.truncated ? TOO_LARGE : read.bytes;
}

/**
 * The body's first `limit` bytes, and whether there was more (then the rest is left unread and
 * the body cancelled); an abort of `signal` or a failing body rejects, as `readCapped`.
 */
export async function readFirst(
  body: Chunks | null,
  limit: number,
  signal?: AbortSignal,
): Promise<{ bytes: Uint8Array<ArrayBuffer>; truncated: boolean }> {
  if (!body) return { bytes: new Uint8Array(), truncated: false };
  const reader = chunkReader(body);
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
      if (size + value.byteLength > limit) {
        chunks.push(value.subarray(0, limit - size));
        await reader.cancel();
        return { bytes: joined(chunks, limit), truncated: true };
      }
      size += value.byteLength;
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel();
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
  return { bytes: joined(chunks, size), truncated: false };
}

interface ChunkReader {
  read(): Promise<IteratorResult<Uint8Array, unknown>>;
  /** Drops the rest of the body; never fails. */
  cancel(): Promise<void>;
}

/**
 * Reads a stream through its reader, whose cancel also stops a read in flight. An iterable's
 * `return` would wait for a `next` in flight, so it is only started: a body whose read is stuck
 * is ended by whatever aborts its source (the call's signal, for a target's answer).
 */
function chunkReader(body: Chunks): ChunkReader {
  if ("getReader" in body) {
    const reader = body.getReader();
    return {
      read: () => reader.read(),
      cancel: () => reader.cancel().catch(() => {}),
    };
  }
  const chunks = body[Symbol.asyncIterator]();
  return {
    read: () => chunks.next(),
    cancel: async () => {
      void chunks.return?.()?.catch(() => {});
    },
  };
}

function joined(chunks: Uint8Array[], size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}
