import { expect, test } from "vitest";
import { parseCidr } from "../../core/ip.ts";
import { allowlist } from "./allowlist.ts";
import { arrived, hookEndpoint, passed, received, refusal } from "./testing.ts";

const guarded = hookEndpoint({ ipAllowlist: ["198.51.100.0/24"] });
const proxy = parseCidr("10.0.0.1");
const step = allowlist(proxy ? [proxy] : []);

test("with an allowlist, only its addresses pass; X-Forwarded-For counts from a trusted proxy", async () => {
  const next = passed();
  await step(received(arrived({}, "198.51.100.7"), guarded), next);
  await step(
    received(arrived({ headers: { "x-forwarded-for": "198.51.100.8" } }, "10.0.0.1"), guarded),
    next,
  );
  expect(next.handed).toHaveLength(2);

  for (const [headers, peer] of [
    [{}, "192.0.2.1"],
    [{ "x-forwarded-for": "198.51.100.8" }, "192.0.2.1"],
  ] as const) {
    const refused = await refusal(step(received(arrived({ headers }, peer), guarded), next));
    expect(refused.code).toBe("ip_not_allowed");
  }
  // No allowlist: every address passes.
  await step(received(arrived({}, "192.0.2.1")), next);
  expect(next.handed).toHaveLength(3);
});
