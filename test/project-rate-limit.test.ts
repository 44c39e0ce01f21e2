/**
 * A project's inbound rate limit (docs/api.md "Rate limits"): every call to any of its endpoints
 * takes a token from the project's bucket as well as from its endpoint's, so a project cannot
 * multiply its rate by adding endpoints. Each plan has a default; an admin sets a project's own.
 */
import { afterAll, expect, test } from "vitest";
import { api, projectWithEndpoint, relay, stack } from "./helpers.ts";

type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const UNTHROTTLED = { rateLimit: { requestsPerSecond: 1000, burst: 1000 } };
const admin = () => stack().adminToken;
const closers: (() => Promise<unknown>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

/** A project with endpoints `v1/hook` and `v1/other`, neither limiting much. */
async function twoEndpoints(plan: "free" | "paid" = "paid") {
  const target = { name: "t", targetUrl: "http://127.0.0.1:9/none" };
  const p = await projectWithEndpoint([target], UNTHROTTLED, plan);
  const other = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints`, {
    path: "other",
    targets: [target],
    ...UNTHROTTLED,
  });
  expect(other.status).toBe(201);
  return p;
}

/** `count` calls at once, alternately to the project's two endpoints. */
const calls = (p: Project, count: number) =>
  Promise.all(
    Array.from({ length: count }, (_, i) =>
      relay(p.slug, i % 2 ? "/v1/other" : "/v1/hook", { key: p.key, body: "{}" }),
    ),
  );

test("a plan's default is the project's rate limit until an admin sets its own", async () => {
  const free = await twoEndpoints("free");
  const paid = await twoEndpoints("paid");
  const limitOf = async (p: Project) =>
    (await api<{ rateLimit: unknown }>(p.ownerToken, "GET", `${p.base}/limits`)).body.rateLimit;
  expect(await limitOf(free)).toEqual({ requestsPerSecond: 100, burst: 200 });
  expect(await limitOf(paid)).toEqual({ requestsPerSecond: 1000, burst: 2000 });

  const own = { requestsPerSecond: 5, burst: 7 };
  const set = await api(admin(), "PUT", `${paid.base}/limits`, { rateLimit: own });
  expect(set.status).toBe(200);
  expect(set.body.rateLimit).toEqual(own);
  expect(await limitOf(paid)).toEqual(own);
  const reset = await api(admin(), "PUT", `${paid.base}/limits`, { rateLimit: null });
  expect(reset.body.rateLimit).toEqual({ requestsPerSecond: 1000, burst: 2000 });
});

test("a project's calls over all its endpoints stop at its rate limit, 429 past it; another project's go on", async () => {
  const p = await twoEndpoints();
  const set = await api(admin(), "PUT", `${p.base}/limits`, {
    rateLimit: { requestsPerSecond: 1, burst: 10 },
  });
  expect(set.status).toBe(200);

  const answers = await calls(p, 40);
  const accepted = answers.filter((a) => a.status === 202);
  const refused = answers.filter((a) => a.status !== 202);
  // The burst of 10, or this edge's share of it, and a token refilled meanwhile at most.
  expect(accepted.length).toBeGreaterThanOrEqual(1);
  expect(accepted.length).toBeLessThanOrEqual(11);
  for (const answer of refused) {
    expect(answer.status).toBe(429);
    expect(answer.json().error.code).toBe("rate_limited");
    expect(answer.json().error.message).toMatch(/project's rate limit/);
    expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1);
  }

  const other = await twoEndpoints();
  expect((await calls(other, 20)).every((a) => a.status === 202)).toBe(true);
});

test("a rate limit out of bounds, or set by anyone but the admin, is refused", async () => {
  const p = await twoEndpoints();
  for (const rateLimit of [
    { requestsPerSecond: 0, burst: 10 },
    { requestsPerSecond: 10, burst: 0 },
    { requestsPerSecond: 10 },
    { requestsPerSecond: 10, burst: 1.5 },
    "fast",
  ]) {
    const answer = await api(admin(), "PUT", `${p.base}/limits`, { rateLimit });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: "bad_request" });
  }
  const byOwner = await api(p.ownerToken, "PUT", `${p.base}/limits`, {
    rateLimit: { requestsPerSecond: 1_000_000, burst: 1_000_000 },
  });
  expect(byOwner.status).toBe(403);
});
