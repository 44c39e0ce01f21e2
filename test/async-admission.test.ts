/**
 * Async calls under a burst (issue 13, target 4): an edge has at most RELAY_TEMPORAL_MAX_STARTS
 * workflow starts in flight, and a call finding them taken waits at most
 * RELAY_TEMPORAL_START_WAIT_MS for one. Past that it is 503 `unavailable` with Retry-After and
 * nothing was queued; every 202 is delivered. A second edge with one slot and no wait makes a
 * burst of concurrent calls meet the bound; without batching, since batches would carry one
 * project's burst in a few starts (test/batching.test.ts).
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { api, eventually, extraEdge, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const [edgePort = 0] = await freePorts(1);
const edge = extraEdge("edge-start-bound", edgePort, {
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  RELAY_TEMPORAL_MAX_STARTS: "1",
  RELAY_TEMPORAL_START_WAIT_MS: "0",
  RELAY_BATCH_MAX_ITEMS: "1",
});
const throughEdge = { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort };

beforeAll(() => edge.start());
afterAll(() => edge.stop());

test("a burst past the edge's starts in flight gets 503 with Retry-After; every 202 is delivered, no 503 queued", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }], {
    rateLimit: { requestsPerSecond: 1000, burst: 1000 },
  });
  const answers = await Promise.all(
    Array.from({ length: 40 }, () =>
      relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge }),
    ),
  );
  const idOf = (answer: (typeof answers)[number]) => answer.headers["x-relay-request-id"];
  const accepted = answers.filter((answer) => answer.status === 202);
  const refused = answers.filter((answer) => answer.status !== 202);
  expect(accepted.length).toBeGreaterThan(0);
  expect(refused.length).toBeGreaterThan(0);
  for (const answer of refused) {
    expect(answer.status).toBe(503);
    expect(answer.headers["retry-after"]).toBe("1");
    expect(answer.json()).toEqual({
      error: { code: "unavailable", message: "too many requests are being queued; retry" },
    });
  }

  const delivered = () => new Set(sink.received.map((r) => r.headers["x-relay-request-id"]));
  await eventually(async () => accepted.every((answer) => delivered().has(idOf(answer) as string)));
  // A refused call started nothing: no delivery and no log entry. The log lists exactly the
  // accepted calls; a refused one's own read is 404 (one is enough: each read looks for a batch).
  for (const answer of refused) expect(delivered().has(idOf(answer) as string)).toBe(false);
  const loggedIds = async () => {
    const page = await api<{ requests: { requestId: string }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests?limit=100`,
    );
    return page.body.requests.map((r) => r.requestId).sort();
  };
  const acceptedIds = accepted.map(idOf).sort();
  await eventually(async () => (await loggedIds()).length >= acceptedIds.length);
  expect(await loggedIds()).toEqual(acceptedIds);
  const [refusedId] = refused.map(idOf);
  const log = await api(p.ownerToken, "GET", `${p.base}/requests/${refusedId}`);
  expect(log.status).toBe(404);
  // The slot comes back with each answer.
  expect(
    (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge })).status,
  ).toBe(202);
  await sink.close();
}, 60_000);
