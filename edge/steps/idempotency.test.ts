import { expect, test } from "vitest";
import { idempotency } from "./idempotency.ts";
import { arrived, hookEndpoint, passed, received, refusal } from "./testing.ts";

test("an Idempotency-Key is handed on; a malformed one, or one on a stream endpoint, is a 400", async () => {
  const next = passed<{ idempotencyKey: string | null }>();
  await idempotency(received(arrived({ headers: { "idempotency-key": "order-1" } })), next);
  await idempotency(received(arrived()), next);
  expect(next.handed.map((e) => e.idempotencyKey)).toEqual(["order-1", null]);

  const long = await refusal(
    idempotency(received(arrived({ headers: { "idempotency-key": "k".repeat(300) } })), next),
  );
  expect(long.message).toMatch(/^Idempotency-Key must be/);
  const streams = hookEndpoint();
  streams.targets = streams.targets.map((t) => ({ ...t, deliveryMode: "stream" }));
  const onStream = await refusal(
    idempotency(received(arrived({ headers: { "idempotency-key": "order-1" } }), streams), next),
  );
  expect(onStream.message).toMatch(/stream cannot be answered twice/);
});
