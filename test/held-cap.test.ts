/**
 * The cap on waiting deliveries under a burst (docs/api.md "Waiting deliveries"): a call to a
 * target that holds its deliveries (paused, or its circuit open) takes its place under the cap as
 * it is accepted, as a delayed call does, so a burst from every edge at once is held up to the
 * cap and the rest are 409 `limit_exceeded`, not held first and counted after.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  extraEdge,
  finishedLog,
  grantCredits,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const sql = connect(stack().databaseUrl, { max: 2 });
const sink = await targetServer();
const [secondEdgePort = 0] = await freePorts(1);
const secondEdge = extraEdge("edge-held-cap", secondEdgePort);
beforeAll(() => secondEdge.start());
afterAll(async () => {
  await Promise.all([sink.close(), secondEdge.stop()]);
  await sql.end();
});

const UNTHROTTLED = { rateLimit: { requestsPerSecond: 1000, burst: 1000 } };
const CAP = 50;

/** `count` calls at once, every other one through the second edge. */
async function burst(p: Project, count: number) {
  const edges = [
    undefined,
    { edgeUrl: `http://127.0.0.1:${secondEdgePort}`, edgePort: secondEdgePort },
  ];
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}`, edge: edges[i % 2] }),
    ),
  );
  const accepted = answers.filter((a) => a.status === 202).map((a) => a.json().requestId as string);
  const refused = answers.filter((a) => a.status !== 202);
  return { accepted, refused };
}

const waitingAt = async (p: Project) =>
  (
    await api<{ targets: { waiting: number }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/lines/v1/endpoints/hook/circuits`,
    )
  ).body.targets.reduce((sum, t) => sum + t.waiting, 0);

async function pausedProject(pause: "endpoint" | "target") {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }], UNTHROTTLED);
  await sql`update projects set max_waiting_deliveries = ${CAP} where slug = ${p.slug}`;
  await grantCredits(p.slug, 1_000);
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  const paused = await api(
    p.ownerToken,
    "POST",
    pause === "endpoint" ? `${endpoint}/pause` : `${endpoint}/targets/t/pause`,
  );
  expect(paused.status).toBe(200);
  return {
    p,
    resume: pause === "endpoint" ? `${endpoint}/resume` : `${endpoint}/targets/t/resume`,
  };
}

for (const pause of ["endpoint", "target"] as const) {
  test(`a burst of 300 calls to a paused ${pause} is held up to the cap of ${CAP}, the rest 409`, async () => {
    const { p, resume } = await pausedProject(pause);

    const { accepted, refused } = await burst(p, 300);
    expect(accepted).toHaveLength(CAP);
    for (const answer of refused) {
      expect(answer.status).toBe(409);
      expect(answer.json().error.code).toBe("limit_exceeded");
    }
    await eventually(async () => (await waitingAt(p)) === CAP, 30_000);
    // Held, nothing more is let in; resumed, every accepted call is delivered.
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(409);
    expect((await api(p.ownerToken, "POST", resume)).status).toBe(200);
    for (const id of accepted) expect((await finishedLog(p, id, 60_000)).status).toBe("delivered");
    await eventually(
      async () => (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status === 202,
    );
  }, 120_000);
}

test("a cancelled call to a paused target gives its place back at once", async () => {
  const { p } = await pausedProject("target");
  const { accepted } = await burst(p, CAP);
  expect(accepted).toHaveLength(CAP);
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(409);
  const [first] = accepted;
  expect((await api(p.ownerToken, "DELETE", `${p.base}/requests/${first}`)).status).toBe(200);
  await eventually(
    async () => (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status === 202,
  );
}, 120_000);

test("replays to a paused target at once take their places under the cap as calls do", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }], UNTHROTTLED);
  await grantCredits(p.slug, 1_000);
  const { accepted } = await burst(p, 5);
  for (const id of accepted) expect((await finishedLog(p, id, 60_000)).status).toBe("delivered");
  await sql`update projects set max_waiting_deliveries = 3 where slug = ${p.slug}`;
  await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/hook/targets/t/pause`);

  const replays = await Promise.all(
    accepted.map((id) => api(p.ownerToken, "POST", `${p.base}/requests/${id}/replay`)),
  );
  expect(replays.map((r) => r.status).sort()).toEqual([202, 202, 202, 409, 409]);
  await eventually(async () => (await waitingAt(p)) === 3, 30_000);
}, 120_000);

test("once a target's circuit opens, a burst to it is held up to the cap too", async () => {
  const failing = await targetServer(() => ({ status: 503 }));
  const p = await projectWithEndpoint([{ name: "t", targetUrl: failing.url }], {
    ...UNTHROTTLED,
    circuitBreaker: { failureThreshold: 1, windowSeconds: 60, disableAfterSeconds: 3600 },
  });
  await grantCredits(p.slug, 1_000);
  await sql`update projects set max_waiting_deliveries = ${CAP} where slug = ${p.slug}`;
  // One call fails: the circuit opens, and the edges learn the target holds.
  await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  await eventually(async () => {
    const circuits = await api<{ targets: { state: string }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/lines/v1/endpoints/hook/circuits`,
    );
    return circuits.body.targets[0]?.state === "open";
  });
  // The first call itself waits for the circuit too (or soon will): one place fewer, at most.
  const { accepted, refused } = await burst(p, 300);
  expect(accepted.length).toBeGreaterThanOrEqual(CAP - 1);
  expect(accepted.length).toBeLessThanOrEqual(CAP);
  for (const answer of refused) expect(answer.json().error.code).toBe("limit_exceeded");
  await eventually(async () => (await waitingAt(p)) === accepted.length + 1, 30_000);
  await failing.close();
}, 120_000);
