/** Credits: one charge per delivery that reached its target, by size, from the key's pool. */
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  api,
  eventually,
  finishedLog,
  mintKey,
  newProject,
  projectWithEndpoint,
  relay,
  stack,
  type TargetSpec,
  targetServer,
} from "./helpers.ts";

type Usage = {
  plan: string;
  pools: Record<"live" | "test", { used: number; remaining: number | null; held: number | null }>;
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

describe("charges", () => {
  test("a new project starts with RELAY_INITIAL_CREDITS in each metered pool", async () => {
    const paid = await newProject("paid");
    expect((await api<Usage>(paid.ownerToken, "GET", `/projects/${paid.slug}/usage`)).body).toEqual(
      {
        plan: "paid",
        pools: {
          live: { used: 0, remaining: 100, held: 0 },
          test: { used: 0, remaining: 100, held: 0 },
        },
      },
    );
    const free = await newProject("free");
    const freeUsage = (await api<Usage>(free.ownerToken, "GET", `/projects/${free.slug}/usage`))
      .body;
    expect(freeUsage.pools.live.remaining).toBeNull();
    expect(freeUsage.pools.live.held).toBeNull();
    expect(freeUsage.pools.test.remaining).toBe(100);
  });
});

/**
 * The billing rule of docs/design.md, one delivery scenario per row, each in a fresh project: what
 * the live and test pools were charged once the request finished.
 */
describe("the billing rule", () => {
  const json = (bytes: number) => `"${"x".repeat(bytes - 2)}"`;
  let ok: Awaited<ReturnType<typeof target>>;
  let rejecting: Awaited<ReturnType<typeof target>>;
  let flaky: Awaited<ReturnType<typeof target>>;
  let cutStream: string;
  beforeAll(async () => {
    ok = await target();
    rejecting = await target(() => ({ status: 400 }));
    // Fails each delivery's first attempt, so every delivery is retried once.
    const tried = new Set<unknown>();
    flaky = await target(({ headers }) => {
      const first = !tried.has(headers["x-relay-delivery-id"]);
      tried.add(headers["x-relay-delivery-id"]);
      return { status: first ? 503 : 200 };
    });
    // Announces 300 000 bytes (5 credits' worth), sends one 70 000-byte event (2), then drops
    // the connection: only what was delivered is billed.
    const server = createServer((_, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "content-length": "300000" });
      res.write(`data: ${"x".repeat(70_000)}\n\n`, () => res.socket?.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    cutStream = `http://127.0.0.1:${(server.address() as { port: number }).port}/events`;
  });

  interface Row {
    plan?: "free" | "paid";
    mode?: "live" | "test";
    targets: () => TargetSpec[];
    body: string;
    charged: { live: number; test: number };
  }
  const to =
    (url: () => string, extra: Partial<TargetSpec> = {}) =>
    () => [{ name: "t", targetUrl: url(), ...extra }];
  const rows: [string, Row][] = [
    ["0 B", { targets: to(() => ok.url), body: "", charged: { live: 1, test: 0 } }],
    ["1 B", { targets: to(() => ok.url), body: "1", charged: { live: 1, test: 0 } }],
    ["64 KiB", { targets: to(() => ok.url), body: json(65_536), charged: { live: 1, test: 0 } }],
    [
      "64 KiB + 1",
      { targets: to(() => ok.url), body: json(65_537), charged: { live: 2, test: 0 } },
    ],
    [
      "5 MiB (by reference)",
      { targets: to(() => ok.url), body: json(5 * 1024 * 1024), charged: { live: 80, test: 0 } },
    ],
    [
      "three targets, each retried once: retries are free",
      {
        targets: () => ["a", "b", "c"].map((name) => ({ name, targetUrl: flaky.url })),
        body: "{}",
        charged: { live: 3, test: 0 },
      },
    ],
    [
      "a target that answered 400 (it was reached)",
      { targets: to(() => rejecting.url), body: "{}", charged: { live: 1, test: 0 } },
    ],
    [
      "a sync target and its async mirror, 64 KiB + 1 each",
      {
        targets: () => [
          { name: "live", targetUrl: ok.url, deliveryMode: "sync" },
          { name: "mirror", targetUrl: ok.url },
        ],
        body: json(65_537),
        charged: { live: 4, test: 0 },
      },
    ],
    [
      "a stream cut short after 70 000 bytes",
      {
        targets: to(() => cutStream, { deliveryMode: "stream" }),
        body: "{}",
        charged: { live: 2, test: 0 },
      },
    ],
    [
      "failed on our side: the sync target was never reached",
      {
        targets: to(() => "http://127.0.0.1:9/x", { deliveryMode: "sync", timeoutSeconds: 1 }),
        body: "{}",
        charged: { live: 0, test: 0 },
      },
    ],
    [
      "free tier, live key: unmetered",
      { plan: "free", targets: to(() => ok.url), body: "{}", charged: { live: 0, test: 0 } },
    ],
    [
      "test-mode key: the test pool pays",
      { mode: "test", targets: to(() => ok.url), body: "{}", charged: { live: 0, test: 1 } },
    ],
  ];

  test.each(rows)("%s", async (_, row) => {
    const p = await projectWithEndpoint(row.targets(), {}, row.plan);
    const key = row.mode === "test" ? await mintKey(p, "test") : p.key;
    // The body's exact bytes: unlabelled, so even the empty one passes the JSON check.
    await relay(p.slug, "/v1/hook", {
      key,
      body: row.body,
      headers: { "content-type": "application/octet-stream" },
    }).catch(() => null); // the cut stream's body ends in an error; its charge is what counts
    await eventually(async () => {
      const log = await api<{ requests: { status: string }[] }>(
        p.ownerToken,
        "GET",
        `${p.base}/requests`,
      );
      const { requests } = log.body;
      return (
        requests.length === 1 && requests.every((r) => !["queued", "delivering"].includes(r.status))
      );
    });
    const { pools } = await usage(p);
    expect({ live: pools.live.used, test: pools.test.used }).toEqual(row.charged);
  });
});

test("a pool too low for a call's deliveries is 402 insufficient_credits until the admin adds credits", async () => {
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
    else await finishedLog(p, answer.json().requestId);
  }
  expect(refused?.json()).toEqual({
    error: { code: "insufficient_credits", message: expect.any(String) },
  });
  // 12 requests of 8 fitted in 100; the 4 left do not take a 13th, and the pool never goes below 0.
  expect((await usage(p)).pools.live).toEqual({ used: 96, remaining: 4, held: 0 });

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
