import { expect, test } from "vitest";
import { schedule } from "./schedule.ts";
import { arrived, hookEndpoint, passed, received, refusal } from "./testing.ts";

const now = new Date("2026-11-24T12:00:00Z");
const step = schedule({ now: () => now });

test("Relay-Delay and Relay-Not-Before hand on the time to deliver; none hands on null", async () => {
  const next = passed<{ notBefore: Date | null }>();
  await step(received(arrived({ headers: { "relay-delay": "90s" } })), next);
  await step(received(arrived({ headers: { "relay-not-before": "2026-11-24T13:00:00Z" } })), next);
  await step(received(arrived()), next);
  expect(next.handed.map((e) => e.notBefore?.toISOString() ?? null)).toEqual([
    "2026-11-24T12:01:30.000Z",
    "2026-11-24T13:00:00.000Z",
    null,
  ]);
});

test("a bad delay, one past 7 days, or one on an endpoint that answers at once is a 400", async () => {
  const next = passed();
  const bad = await refusal(step(received(arrived({ headers: { "relay-delay": "soon" } })), next));
  expect(bad).toMatchObject({ code: "bad_request" });
  const far = await refusal(step(received(arrived({ headers: { "relay-delay": "8d" } })), next));
  expect(far.message).toBe("a delivery may be delayed by at most 7 days");
  const answering = hookEndpoint();
  answering.targets = answering.targets.map((t) => ({ ...t, deliveryMode: "sync" }));
  const onSync = await refusal(
    step(received(arrived({ headers: { "relay-delay": "30s" } }), answering), next),
  );
  expect(onSync.message).toMatch(/apply to async endpoints only/);
  expect(next.handed).toEqual([]);
});
