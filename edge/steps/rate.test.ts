import { expect, test } from "vitest";
import { EndpointRuntime } from "../endpoints.ts";
import type { Received } from "../pipeline.ts";
import { rate, rateHeaders } from "./rate.ts";
import { arrived, hookEndpoint, passed, projectState, received, refusal } from "./testing.ts";

const limited = hookEndpoint({ rateLimit: { requestsPerSecond: 1, burst: 2 } });

/** Limit and remaining; the reset depends on how much time passed. */
function rateHeadersOf(response: Response) {
  return ["limit", "remaining"].map((n) => response.headers.get(`ratelimit-${n}`));
}

test("each call takes a token; past the burst it is a 429 with Retry-After", async () => {
  const runtime = new EndpointRuntime();
  const step = rate(runtime);
  const next = passed();
  await step(received(arrived(), limited), next);
  await step(received(arrived(), limited), next);
  const third = received(arrived(), limited);
  expect((await refusal(step(third, next))).code).toBe("rate_limited");
  expect(next.handed).toHaveLength(2);
  expect(third.rate?.allowed).toBe(false);
  expect(third.responseHeaders.get("retry-after")).toBe("1");
});

test("the after-step states the call's own verdict, or the bucket as it stands without taking from it", async () => {
  const runtime = new EndpointRuntime();
  const chain = (envelope: Received) =>
    rateHeaders(runtime)(envelope, (e) => rate(runtime)(e as Received, passed()));
  expect(rateHeadersOf(await chain(received(arrived(), limited)))).toEqual(["2", "1"]);

  // Refused before the rate step (here by the step after it): no token taken.
  const refusedEarlier = await rateHeaders(runtime)(received(arrived(), limited), async () =>
    Response.json({}, { status: 403 }),
  );
  expect(refusedEarlier.status).toBe(403);
  expect(rateHeadersOf(refusedEarlier)).toEqual(["2", "1"]);
  expect(rateHeadersOf(await chain(received(arrived(), limited)))).toEqual(["2", "0"]);
});

test("calls to each of a project's endpoints take from the project's bucket too: past its burst, a 429 naming the project", async () => {
  const runtime = new EndpointRuntime();
  const step = rate(runtime);
  const next = passed();
  const roomy = { rateLimit: { requestsPerSecond: 100, burst: 100 } };
  const [hook, other] = [hookEndpoint(roomy), hookEndpoint({ ...roomy, path: "other" })];
  const projectWide = { projectRateLimit: { requestsPerSecond: 1, burst: 3 } };
  const call = (endpoint: typeof hook) =>
    received(arrived(), endpoint, projectState(endpoint, projectWide));
  for (const endpoint of [hook, other, hook]) await step(call(endpoint), next);
  const fourth = call(other);
  const refused = await refusal(step(fourth, next));
  expect(refused.code).toBe("rate_limited");
  expect(refused.message).toMatch(/project's rate limit/);
  expect(fourth.responseHeaders.get("retry-after")).toBe("1");
  expect(next.handed).toHaveLength(3);
});
