/**
 * What operators get from every process: /healthz, /readyz and Prometheus /metrics, scraped
 * here from loopback after real traffic.
 */
import { createServer } from "node:http";
import { request } from "undici";
import { afterAll, expect, test } from "vitest";
import {
  eventually,
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const sink = await targetServer();
afterAll(() => sink.close());

const processes = () => ({
  control: stack().controlUrl,
  edge: stack().edgeUrl,
  worker: stack().workerUrl,
});

async function get(url: string) {
  const response = await request(url);
  return { status: response.statusCode, text: await response.body.text() };
}

test.each(["control", "edge", "worker"] as const)(
  "the %s answers /healthz and /readyz",
  async (name) => {
    const base = processes()[name];
    expect(await get(`${base}/healthz`)).toEqual({ status: 200, text: '{"status":"ok"}' });
    const ready = await get(`${base}/readyz`);
    expect(ready.status).toBe(200);
    const { status, checks } = JSON.parse(ready.text);
    expect(status).toBe("ready");
    expect(Object.values(checks).every((outcome) => outcome === "ok")).toBe(true);
  },
);

test("after traffic, each process's /metrics shows it: requests, deliveries, latencies", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  for (let i = 0; i < 3; i++) {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    await finishedLog(p, answer.json().requestId);
  }
  await relay(p.slug, "/v1/hook", { key: "rk_live_wrong", body: "{}" });

  const edge = (await get(`${stack().edgeUrl}/metrics`)).text;
  expect(edge).toContain(
    `relay_edge_requests_total{status="202",project="${p.slug}",endpoint="v1/hook"} 3`,
  );
  // A refused key never names what the caller asked for.
  expect(edge).toMatch(/relay_edge_requests_total\{status="401",project="",endpoint=""\} \d+/);
  expect(edge).toMatch(
    /relay_edge_temporal_start_duration_seconds_count\{workflow="deliverRequest"\} \d+/,
  );
  expect(edge).toMatch(/relay_edge_key_lookups_total\{cache="hit"\} \d+/);
  expect(edge).toMatch(
    /relay_edge_request_duration_seconds_bucket\{le="0.1",status_class="2xx"\} \d+/,
  );

  const worker = (await get(`${stack().workerUrl}/metrics`)).text;
  expect(worker).toMatch(
    /relay_worker_delivery_attempts_total\{outcome="delivered",mode="async"\} \d+/,
  );
  expect(worker).toMatch(
    /relay_worker_delivery_attempt_duration_seconds_count\{mode="async"\} \d+/,
  );

  const control = (await get(`${stack().controlUrl}/metrics`)).text;
  expect(control).toMatch(
    /relay_control_calls_total\{protocol="rest",route="POST \/projects",status="201"\} \d+/,
  );
  expect(control).toMatch(
    /relay_control_calls_total\{protocol="rpc",route="relay.v1.EdgeService\/ResolveKey",status="OK"\} \d+/,
  );
  expect(control).toContain("process_resident_memory_bytes");
});

test("a caller that hangs up before its answer is counted as 499, not as the 5xx it never got", async () => {
  const slow = createServer((req, res) => {
    req.resume();
    setTimeout(() => res.end("{}"), 2000);
  });
  await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
  const port = (slow.address() as { port: number }).port;
  const p = await projectWithEndpoint([
    { name: "slow", targetUrl: `http://127.0.0.1:${port}/in`, deliveryMode: "sync" },
  ]);
  await expect(
    request(`${stack().edgeUrl}/v1/hook`, {
      method: "POST",
      headers: { host: `${p.slug}.localhost`, authorization: `Bearer ${p.key}` },
      body: "{}",
      signal: AbortSignal.timeout(300),
    }),
  ).rejects.toThrow();
  const counted = `relay_edge_requests_total{status="499",project="${p.slug}",endpoint="v1/hook"} 1`;
  await eventually(async () => (await get(`${stack().edgeUrl}/metrics`)).text.includes(counted));
  await new Promise((resolve) => slow.close(resolve));
});
