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
