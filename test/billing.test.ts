/** Credits: one charge per delivery that reached its target, by size, from the key's pool. */
import { afterAll, describe, expect, test } from "vitest";
import {
  api,
  eventually,
  newProject,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

type Usage = {
  plan: string;
  pools: Record<"live" | "test", { used: number; remaining: number | null }>;
};

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));
async function target(...args: Parameters<typeof targetServer>) {
  const server = await targetServer(...args);
  closers.push(server.close);
  return server;
}

const usage = async (p: { base: string; ownerToken: string }) =>
  (await api<Usage>(p.ownerToken, "GET", `${p.base}/usage`)).body;

/** Waits until the request is finished in the log, so its charges are in. */
async function settled(p: { base: string; ownerToken: string }, requestId: string) {
  await eventually(async () => {
    const log = await api<{ status: string }>(
      p.ownerToken,
      "GET",
      `${p.base}/requests/${requestId}`,
    );
    return log.status === 200 && !["queued", "delivering"].includes(log.body.status);
  });
}

describe("charges", () => {
  test("a new project starts with RELAY_INITIAL_CREDITS in each metered pool", async () => {
    const paid = await newProject("paid");
    expect((await api<Usage>(paid.ownerToken, "GET", `/projects/${paid.slug}/usage`)).body).toEqual(
      {
        plan: "paid",
        pools: { live: { used: 0, remaining: 100 }, test: { used: 0, remaining: 100 } },
      },
    );
    const free = await newProject("free");
    const freeUsage = (await api<Usage>(free.ownerToken, "GET", `/projects/${free.slug}/usage`))
      .body;
    expect(freeUsage.pools.live.remaining).toBeNull();
    expect(freeUsage.pools.test.remaining).toBe(100);
  });

  test("three targets cost three deliveries; 64 KiB + 1 costs two each; retries are free", async () => {
    const flaky = await target((_, i) => ({ status: i === 0 ? 503 : 200 }));
    const [a, b] = [await target(), await target()];
    const p = await projectWithEndpoint([
      { name: "flaky", targetUrl: flaky.url },
      { name: "a", targetUrl: a.url },
      { name: "b", targetUrl: b.url },
    ]);
    const small = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json().requestId;
    await settled(p, small);
    expect((await usage(p)).pools.live).toEqual({ used: 3, remaining: 97 });

    const body = JSON.stringify({ pad: "x".repeat(65_537 - 10) });
    expect(Buffer.byteLength(body)).toBe(65_537);
    const big = (await relay(p.slug, "/v1/hook", { key: p.key, body })).json().requestId;
    await settled(p, big);
    expect((await usage(p)).pools.live).toEqual({ used: 9, remaining: 91 });
  });

  test("a target that answered 400 is charged; one never reached is not", async () => {
    const rejecting = await target(() => ({ status: 400 }));
    const p = await projectWithEndpoint([{ name: "rejecting", targetUrl: rejecting.url }]);
    await settled(
      p,
      (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json().requestId,
    );
    expect((await usage(p)).pools.live.used).toBe(1);

    const sync = await projectWithEndpoint([
      { name: "gone", targetUrl: "http://127.0.0.1:9/x", deliveryMode: "sync", timeoutSeconds: 1 },
    ]);
    expect((await relay(sync.slug, "/v1/hook", { key: sync.key, body: "{}" })).status).toBe(502);
    expect((await usage(sync)).pools.live.used).toBe(0);
  });

  test("a test-mode key pays from the test pool", async () => {
    const sink = await target();
    const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const minted = await api<{ plaintext: string }>(p.ownerToken, "POST", `${p.base}/keys`, {
      name: "t",
      mode: "test",
    });
    const { requestId } = (
      await relay(p.slug, "/v1/hook", { key: minted.body.plaintext, body: "{}" })
    ).json();
    await settled(p, requestId);
    expect((await usage(p)).pools).toEqual({
      live: { used: 0, remaining: 100 },
      test: { used: 1, remaining: 99 },
    });
  });
});

test("an empty metered pool is 402 insufficient_credits until the admin adds credits", async () => {
  const sink = await target();
  const p = await projectWithEndpoint([
    { name: "a", targetUrl: sink.url },
    { name: "b", targetUrl: sink.url },
  ]);
  const body = JSON.stringify({ pad: "x".repeat(200_000) }); // 4 credits a delivery, 8 a request
  let refused: Awaited<ReturnType<typeof relay>> | undefined;
  for (let i = 0; i < 20 && !refused; i++) {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body });
    if (answer.status === 402) refused = answer;
    else await settled(p, answer.json().requestId);
  }
  expect(refused?.json()).toEqual({
    error: { code: "insufficient_credits", message: expect.any(String) },
  });
  expect((await usage(p)).pools.live.remaining).toBeLessThanOrEqual(0);

  const topUp = await api<Usage>(stack().adminToken, "POST", `${p.base}/credits`, {
    pool: "live",
    amount: 1000,
  });
  expect(topUp.status).toBe(200);
  expect(
    (await api(p.ownerToken, "POST", `${p.base}/credits`, { pool: "live", amount: 5 })).status,
  ).toBe(403);
  await eventually(
    async () => (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status === 202,
    5000,
  );
});
