/**
 * A cancel while one target still holds a request (its flow limits) and another got it: the held
 * target never gets it, so the request is not `delivered` but `partially_failed`, and the cancel
 * answers 409 `conflict` saying so (docs/api.md, cancel). Only a request every target got is
 * `delivered`.
 */
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  finishedLog,
  grantCredits,
  projectWithEndpoint,
  relay,
  targetServer,
} from "./helpers.ts";

const fast = await targetServer();
const slow = await targetServer();
afterAll(async () => {
  await fast.close();
  await slow.close();
});

const CALLS = 20;

test("a cancel while a limited target holds the request leaves it partially failed, not delivered", async () => {
  const p = await projectWithEndpoint([
    { name: "fast", targetUrl: fast.url },
    { name: "slow", targetUrl: slow.url, maxDeliveriesPerSecond: 2, maxConcurrent: 1 },
  ]);
  await grantCredits(p.slug, 2 * CALLS);
  const ids: string[] = [];
  for (let i = 0; i < CALLS; i++) {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}` });
    expect(answer.status).toBe(202);
    ids.push(answer.json().requestId);
  }
  const got = (server: typeof fast, id: string) =>
    server.received.some((r) => r.headers["x-relay-request-id"] === id);
  await eventually(async () => ids.every((id) => got(fast, id)));

  const cancelled = ids.slice(-10);
  const answers = await Promise.all(
    cancelled.map((id) => api(p.ownerToken, "DELETE", `${p.base}/requests/${id}`)),
  );
  for (const [i, id] of cancelled.entries()) {
    const log = await finishedLog(p, id);
    const answer = answers[i];
    if (got(slow, id)) {
      expect(log.status).toBe("delivered");
      expect(answer?.body).toMatchObject({ error: { code: "request_already_delivered" } });
    } else {
      expect(log.status).toBe("partially_failed");
      expect(answer?.status).toBe(409);
      expect(answer?.body).toMatchObject({ error: { code: "conflict" } });
    }
  }
  // The slow target, 2 a second, cannot have had time for most of them.
  expect(cancelled.filter((id) => !got(slow, id)).length).toBeGreaterThan(3);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  for (const id of cancelled) {
    const log = await finishedLog(p, id);
    expect(log.status).toBe(got(slow, id) ? "delivered" : "partially_failed");
  }
}, 60_000);
