import { expect, test } from "vitest";
import { readCapped, readFirst, TOO_LARGE } from "./read-capped.ts";

/** A stream of `chunks`, then closed (or left open: a sender that stalls); records a cancel. */
function streamed(chunks: string[], thenStall = false) {
  const seen = { cancelled: false, pulled: 0 };
  const pending = chunks.map((chunk) => new TextEncoder().encode(chunk));
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const next = pending.shift();
        if (next) {
          seen.pulled++;
          controller.enqueue(next);
        } else if (!thenStall) controller.close();
        else return new Promise(() => {});
      },
      cancel() {
        seen.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, seen };
}

const text = (read: Uint8Array | typeof TOO_LARGE) =>
  read === TOO_LARGE ? read : new TextDecoder().decode(read);

test("a body under or at the limit is answered whole, across chunks", async () => {
  expect(text(await readCapped(streamed(["12", "345"]).stream, 8))).toBe("12345");
  expect(text(await readCapped(streamed(["1234", "5678"]).stream, 8))).toBe("12345678");
  expect(text(await readCapped(streamed([]).stream, 8))).toBe("");
  expect(text(await readCapped(null, 8))).toBe("");
});

test("a body over the limit is too large, and the stream is cancelled unread past it", async () => {
  const { stream, seen } = streamed(["12345", "6789", "never read"]);
  expect(await readCapped(stream, 8)).toBe(TOO_LARGE);
  expect(seen.cancelled).toBe(true);
  expect(seen.pulled).toBe(2);
});

test("one byte over in a single chunk is too large", async () => {
  expect(await readCapped(streamed(["123456789"]).stream, 8)).toBe(TOO_LARGE);
});

test("a Response's body reads the same way", async () => {
  expect(text(await readCapped(new Response("hello").body, 5))).toBe("hello");
  expect(await readCapped(new Response("hello!").body, 5)).toBe(TOO_LARGE);
});

test("an abort stops a stalled read with the signal's reason and cancels the stream", async () => {
  const { stream, seen } = streamed(["12"], true);
  const controller = new AbortController();
  const reading = readCapped(stream, 8, controller.signal);
  setTimeout(() => controller.abort(new Error("too slow")), 10);
  await expect(reading).rejects.toThrow("too slow");
  expect(seen.cancelled).toBe(true);
});

test("a signal aborted already refuses at once", async () => {
  const { stream, seen } = streamed(["12"]);
  await expect(readCapped(stream, 8, AbortSignal.abort(new Error("gone")))).rejects.toThrow("gone");
  expect(seen.cancelled).toBe(true);
});

test("a stream that errors rejects with its error", async () => {
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.error(new Error("reset"));
    },
  });
  await expect(readCapped(stream, 8)).rejects.toThrow("reset");
});

/** Chunks as an async iterable (a Node stream, a target's answer); records its end. */
function iterated(chunks: string[]) {
  const seen = { returned: false, pulled: 0 };
  async function* chunksOf() {
    try {
      for (const chunk of chunks) {
        seen.pulled++;
        yield new TextEncoder().encode(chunk);
      }
    } finally {
      seen.returned = true;
    }
  }
  return { body: chunksOf(), seen };
}

test("an async iterable reads the same way, and is ended unread past the limit", async () => {
  expect(text(await readCapped(iterated(["12", "345"]).body, 8))).toBe("12345");
  const { body, seen } = iterated(["12345", "6789", "never read"]);
  expect(await readCapped(body, 8)).toBe(TOO_LARGE);
  await Promise.resolve();
  expect(seen.returned).toBe(true);
  expect(seen.pulled).toBe(2);
});

test("an async iterable that fails rejects with its error", async () => {
  async function* failing(): AsyncGenerator<Uint8Array> {
    yield new TextEncoder().encode("12");
    throw new Error("reset");
  }
  await expect(readCapped(failing(), 8)).rejects.toThrow("reset");
});

test("the first bytes of a body: all of a short one; of a long one, the limit's worth, marked truncated and the rest unread", async () => {
  const short = await readFirst(streamed(["12", "345"]).stream, 8);
  expect([text(short.bytes), short.truncated]).toEqual(["12345", false]);
  const { stream, seen } = streamed(["12345", "6789", "never read"]);
  const long = await readFirst(stream, 8);
  expect([text(long.bytes), long.truncated]).toEqual(["12345678", true]);
  expect(seen.cancelled).toBe(true);
  expect(seen.pulled).toBe(2);
});
