/**
 * Accepted before started (issue 27): an immediate async call is answered 202 once its
 * reservation and its workflow's start are kept in Postgres, and the edge makes the start after.
 * A start the edge cannot make is made by the control plane's sweep: the call is delivered all
 * the same. Meanwhile that edge answers only what it could start itself, so what waits for the
 * sweep is bounded. The edge here reaches Temporal's HTTP API through a proxy the test cuts.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import {
  cuttableProxy,
  extraEdge,
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const temporalHttp = await cuttableProxy(new URL(stack().temporalHttpAddress));
const [edgePort = 0] = await freePorts(1);
const edge = extraEdge("edge-accepts", edgePort, {
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  TEMPORAL_HTTP_ADDRESS: temporalHttp.url,
});
const throughEdge = { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort };

beforeAll(() => edge.start());
afterAll(async () => {
  await edge.stop();
  await temporalHttp.close();
});

test("a call accepted when its edge can no longer reach Temporal is delivered by the control plane's sweep; the edge's next calls get 503 until it reaches Temporal again", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const post = () => relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge });
  const delivered = (answer: Awaited<ReturnType<typeof post>>) =>
    finishedLog(p, answer.json().requestId as string, 30_000);

  expect((await delivered(await post())).status).toBe("delivered");

  temporalHttp.cut();
  const accepted = await post();
  expect(accepted.status).toBe(202);
  // Its start failed after its 202: the edge no longer answers before starting, and cannot start.
  const refused = await post();
  expect(refused.status).toBe(503);
  expect(refused.json()).toEqual({
    error: { code: "unavailable", message: "the request could not be queued; try again" },
  });

  const log = await delivered(accepted);
  expect(log.status).toBe("delivered");
  const ids = sink.received.map((r) => r.headers["x-relay-request-id"]);
  expect(ids.filter((id) => id === accepted.json().requestId)).toHaveLength(1);

  temporalHttp.restore();
  const again = await post();
  expect(again.status).toBe(202);
  expect((await delivered(again)).status).toBe("delivered");
  expect((await delivered(await post())).status).toBe("delivered");
  await sink.close();
}, 90_000);
