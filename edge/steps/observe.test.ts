import { expect, test } from "vitest";
import type { Answered } from "../deps.ts";
import { observe } from "./observe.ts";
import { arrived, hookEndpoint, received } from "./testing.ts";

const answer = (status: number, requestId?: string) => async () =>
  new Response(null, { status, headers: requestId ? { "x-relay-request-id": requestId } : {} });

test("every answer is told; the project and endpoint only once the endpoint was found", async () => {
  const told: Answered[] = [];
  const step = observe((answered) => told.push(answered));
  // Authenticated but not routed: the project stays unnamed.
  await step(Object.assign(arrived(), { project: "acme" }), answer(404));
  await step(received(arrived()), answer(202, "req_1"));
  expect(told.map(({ seconds: _, ...rest }) => rest)).toEqual([
    { project: null, endpoint: null, status: 404, requestId: null },
    { project: "acme", endpoint: "v1/hook", status: 202, requestId: "req_1" },
  ]);
});

test("a caller gone before its answer is a 499; a stream is told after its head is out", async () => {
  const told: Answered[] = [];
  const step = observe((answered) => told.push(answered));
  const leaving = new AbortController();
  const gone = arrived({ signal: leaving.signal });
  leaving.abort();
  await step(gone, answer(504));
  expect(told.map((a) => a.status)).toEqual([499]);

  const streams = hookEndpoint();
  streams.targets = streams.targets.map((t) => ({ ...t, deliveryMode: "stream" }));
  await step(received(arrived(), streams), answer(200));
  expect(told).toHaveLength(1);
  await new Promise((resolve) => setTimeout(resolve, 0));
  expect(told.map((a) => a.status)).toEqual([499, 200]);
});
