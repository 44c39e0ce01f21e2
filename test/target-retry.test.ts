/**
 * A target's own retry policy on the real stack: its attempts capped, its backoff its own (a
 * target's Retry-After still postponing an attempt), bounded per plan when saved, and a target
 * without one retried as the deployment retries.
 */
import { afterAll, expect, test } from "vitest";
import { EndpointService } from "../gen/relay/v1/routing_pb.ts";
import {
  api,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  targetServer,
} from "./helpers.ts";

type Logged = { status: string; attempts: { targetName: string; statusCode: number | null }[] };

const down = await targetServer(() => ({ status: 503 }));
/** 503 with Retry-After: 3 to a request's first attempt, 200 to the next. */
const backSoon = await targetServer((received) => {
  const attempt = Number(received.headers["x-relay-attempt"]);
  return attempt === 1 ? { status: 503, headers: { "retry-after": "3" } } : { status: 200 };
});
afterAll(async () => {
  await down.close();
  await backSoon.close();
});

const send = async (p: { slug: string; key: string }, id: string) => {
  const sent = await relay(p.slug, "/v1/hook", { key: p.key, body: JSON.stringify({ id }) });
  expect(sent.status).toBe(202);
  return (sent.json() as { requestId: string }).requestId;
};
const gapsMs = (target: { received: { body: string; at: number }[] }, id: string) => {
  const at = target.received.filter((r) => r.body.includes(id)).map((r) => r.at);
  return at.slice(1).map((t, i) => t - (at[i] ?? t));
};

test("a target's attempts stop at its maxAttempts, each its own backoff apart; the request fails", async () => {
  const p = await projectWithEndpoint([
    {
      name: "three-tries",
      targetUrl: down.url,
      retry: { maxAttempts: 3, initialIntervalSeconds: 1, backoffCoefficient: 1 },
    },
  ]);
  const requestId = await send(p, "capped");
  const log = await finishedLog<Logged>(p, requestId, 60_000);
  expect(log.status).toBe("failed");
  expect(log.attempts.map((a) => a.statusCode)).toEqual([503, 503, 503]);
  const gaps = gapsMs(down, "capped");
  expect(gaps).toHaveLength(2);
  // A coefficient of 1: each wait the first interval's, not doubling.
  for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(900);
});

test("maxAttempts 1: a failed first attempt fails the delivery at once, into the failure queue", async () => {
  const p = await projectWithEndpoint([
    { name: "one-try", targetUrl: down.url, retry: { maxAttempts: 1 } },
  ]);
  const requestId = await send(p, "once");
  const log = await finishedLog<Logged>(p, requestId, 30_000);
  expect(log).toMatchObject({ status: "failed", attempts: [{ statusCode: 503 }] });
  const failures = await api<{ requests: { requestId: string }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/failures`,
  );
  expect(failures.body.requests.map((r) => r.requestId)).toContain(requestId);
});

test("a target's Retry-After postpones its own shorter first interval", async () => {
  const p = await projectWithEndpoint([
    { name: "back-soon", targetUrl: backSoon.url, retry: { initialIntervalSeconds: 1 } },
  ]);
  const requestId = await send(p, "after-3s");
  const log = await finishedLog<Logged>(p, requestId, 30_000);
  expect(log.status).toBe("delivered");
  const [gap = 0] = gapsMs(backSoon, "after-3s");
  expect(gap).toBeGreaterThanOrEqual(2_900);
});

test("each plan bounds a target's retry policy; a sync target takes none; Connect reads it back", async () => {
  const put = async (plan: "free" | "paid", target: Record<string, unknown>) => {
    const p = await projectWithEndpoint([{ name: "t", targetUrl: down.url }], {}, plan);
    const answer = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
      targets: [{ name: "t", targetUrl: down.url, ...target }],
    });
    return { p, answer };
  };
  const twoDays = { retry: { windowSeconds: 172_800 } };
  const free = await put("free", twoDays);
  expect(free.answer.status).toBe(400);
  expect(free.answer.body).toMatchObject({
    error: { code: "bad_request", details: [{ path: "targets.0.retry.windowSeconds" }] },
  });
  const paid = await put("paid", twoDays);
  expect(paid.answer.status).toBe(200);
  const sync = await put("paid", { deliveryMode: "sync", retry: { maxAttempts: 2 } });
  expect(sync.answer.body).toMatchObject({
    error: { details: [{ path: "targets.0.retry" }] },
  });
  const { endpoint } = await memberClient(EndpointService, paid.p.ownerToken).getEndpoint({
    project: paid.p.slug,
    line: "v1",
    path: "hook",
  });
  expect(endpoint?.targets[0]?.retry).toMatchObject({ windowSeconds: 172_800 });
  expect(endpoint?.targets[0]?.retry?.maxAttempts).toBeUndefined();
});
