import { expect, test } from "vitest";
import { body } from "./body.ts";
import { arrived, passed, received, refusal } from "./testing.ts";

const step = body(8, 50);

function streamed(chunks: string[], thenStall = false): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
      if (!thenStall) controller.close();
    },
  });
}

const post = (stream: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
  received(arrived({ body: stream, headers, duplex: "half" } as RequestInit));

test("the whole body is handed on, up to the limit", async () => {
  const next = passed<{ body: Uint8Array }>();
  await step(post(streamed(["1234", "5678"])), next);
  expect(new TextDecoder().decode(next.handed[0]?.body)).toBe("12345678");
});

test("a body over the limit, declared or sent, is a 413; one that stalls is a 408", async () => {
  const declared = post(streamed(["1"]), { "content-length": "9" });
  expect((await refusal(step(declared, passed()))).code).toBe("payload_too_large");
  expect((await refusal(step(post(streamed(["12345", "6789"])), passed()))).code).toBe(
    "payload_too_large",
  );
  expect((await refusal(step(post(streamed(["12"], true)), passed()))).code).toBe(
    "request_timeout",
  );
});
