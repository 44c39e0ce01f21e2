import { expect, test } from "vitest";
import { credits } from "./credits.ts";
import { arrived, hookEndpoint, passed, projectState, received, refusal } from "./testing.ts";

test("a key whose credit pool is empty is a 402; another pool's key passes", async () => {
  const endpoint = hookEndpoint();
  const liveEmpty = projectState(endpoint, { exhaustedPools: ["live"] });
  const refused = await refusal(credits(received(arrived(), endpoint, liveEmpty), passed()));
  expect([refused.code, refused.message]).toEqual([
    "insufficient_credits",
    "the live credit pool is empty",
  ]);
  const next = passed();
  const testEmpty = projectState(endpoint, { exhaustedPools: ["test"] });
  await credits(received(arrived(), endpoint, testEmpty), next);
  expect(next.handed).toHaveLength(1);
});

test("a project whose held deliveries reached its cap is 409 for async calls; a sync call passes", async () => {
  const endpoint = hookEndpoint();
  const full = projectState(endpoint, { heldDeliveriesFull: true, maxWaitingDeliveries: 3 });
  const refused = await refusal(credits(received(arrived(), endpoint, full), passed()));
  expect(refused.code).toBe("limit_exceeded");
  expect(refused.message).toMatch(/cap of 3 scheduled and held deliveries/);

  const sync = hookEndpoint({
    targets: [
      {
        id: "s",
        name: "s",
        targetUrl: "http://s",
        deliveryMode: "sync",
        timeoutSeconds: 30,
        headers: {},
      },
    ],
  });
  const next = passed();
  const syncFull = projectState(sync, { heldDeliveriesFull: true });
  await credits(received(arrived(), sync, syncFull), next);
  expect(next.handed).toHaveLength(1);
});
