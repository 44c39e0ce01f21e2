import { expect, test } from "vitest";
import { loop } from "./loop.ts";
import { arrived, passed, refusal } from "./testing.ts";

const step = loop("relay.test");
const withCdnLoop = (value: string) => arrived({ headers: { "cdn-loop": value } });

test("a request this Relay has marked at most three times goes on", async () => {
  const next = passed();
  for (const value of ["cdn-a", "relay.test", "relay.test, cdn-a; v=1, relay.test, relay.test"]) {
    expect((await step(withCdnLoop(value), next)).status, value).toBe(204);
  }
  expect((await step(arrived(), next)).status).toBe(204);
});

test("a fourth mark is 508 loop_detected; an overlong CDN-Loop is 400; neither goes on", async () => {
  const next = passed();
  const looped = await refusal(
    step(withCdnLoop("relay.test, relay.test;a=1, RELAY.test, relay.test"), next),
  );
  expect([looped.code, looped.status]).toEqual(["loop_detected", 508]);
  const long = await refusal(step(withCdnLoop(`cdn-a; v=${"x".repeat(4096)}`), next));
  expect(long.code).toBe("bad_request");
  expect(next.handed).toHaveLength(0);
});
