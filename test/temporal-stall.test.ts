/**
 * A Temporal that takes connections and never answers (a partition, a frontend stuck on its
 * store): a call waiting on its workflow's start is answered 503 once the start has waited
 * RELAY_TEMPORAL_START_TIMEOUT_MS, not held for as long as the connection lives; sent again once
 * Temporal answers, it is delivered once.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { finishedLog, projectWithEndpoint, relay, targetServer } from "./helpers.ts";
import { edgeThroughTemporalProxy } from "./proxies.ts";

const { edge, temporalHttp, through } = await edgeThroughTemporalProxy("edge-stalled-temporal", {
  RELAY_TEMPORAL_START_TIMEOUT_MS: "2000",
});

beforeAll(() => edge.start());
afterAll(async () => {
  await edge.stop();
  await temporalHttp.close();
});

test("a start Temporal does not answer is 503 after the start's timeout; the call sent again once it answers is delivered once", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  // A delayed call with a key goes as a workflow of its own: its caller waits for the start.
  const post = () =>
    relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { "idempotency-key": "stalled-1", "relay-delay": "1s" },
      edge: through,
    });

  temporalHttp.stall();
  const stalled = await post();
  expect(stalled.status).toBe(503);
  expect(stalled.json()).toMatchObject({ error: { code: "unavailable" } });

  temporalHttp.restore();
  const accepted = await post();
  expect(accepted.status).toBe(202);
  const requestId = accepted.json().requestId as string;
  expect((await finishedLog(p, requestId, 30_000)).status).toBe("delivered");
  expect(sink.received.map((r) => r.headers["x-relay-request-id"])).toEqual([requestId]);
  await sink.close();
}, 60_000);
