import { describe, expect, test } from "vitest";
import { opsHandler } from "./ops.ts";

const get = (path: string, headers: Record<string, string> = {}) =>
  new Request(`http://relay${path}`, { headers });
const metrics = async () => "relay_up 1\n";
const ok = async () => {};
const down = async () => {
  throw new Error("connection refused");
};

test("healthz answers while the process runs; other paths are not ops'", async () => {
  const ops = opsHandler({ checks: {}, metrics, metricsContentType: "text/plain" });
  const healthz = await ops(get("/healthz"), "10.0.0.1");
  expect(healthz?.status).toBe(200);
  expect(await healthz?.json()).toEqual({ status: "ok" });
  expect(await ops(get("/v1/orders"), "127.0.0.1")).toBeNull();
});

test("an ops path asked with another method is 405, saying it takes GET", async () => {
  const ops = opsHandler({ checks: {}, metrics, metricsContentType: "text/plain" });
  const posted = await ops(new Request("http://relay/metrics", { method: "POST" }), "::1");
  expect([posted?.status, posted?.headers.get("allow")]).toEqual([405, "GET"]);
  expect(await posted?.json()).toMatchObject({ error: { code: "method_not_allowed" } });
});

test("readyz stays 200 but says degraded, naming the advisory check that fails", async () => {
  const degraded = opsHandler({
    checks: { temporal: ok },
    advisories: { worker: down },
    metrics,
    metricsContentType: "",
  });
  const answer = await degraded(get("/readyz"), "::1");
  expect(answer?.status).toBe(200);
  expect(await answer?.json()).toEqual({
    status: "degraded",
    checks: { temporal: "ok", worker: "connection refused" },
  });
});

test("readyz is 503 naming the dependency that does not answer", async () => {
  const ready = opsHandler({
    checks: { postgres: ok, temporal: ok },
    metrics,
    metricsContentType: "",
  });
  expect((await ready(get("/readyz"), "::1"))?.status).toBe(200);
  const notReady = opsHandler({
    checks: { postgres: ok, temporal: down },
    metrics,
    metricsContentType: "",
  });
  const answer = await notReady(get("/readyz"), "::1");
  expect(answer?.status).toBe(503);
  expect(await answer?.json()).toEqual({
    status: "unavailable",
    checks: { postgres: "ok", temporal: "connection refused" },
  });
});

describe("metrics", () => {
  test("without a token, only loopback peers get them", async () => {
    const ops = opsHandler({
      checks: {},
      metrics,
      metricsContentType: "text/plain; version=0.0.4",
    });
    const local = await ops(get("/metrics"), "::ffff:127.0.0.1");
    expect(local?.status).toBe(200);
    expect(local?.headers.get("content-type")).toBe("text/plain; version=0.0.4");
    expect(await local?.text()).toBe("relay_up 1\n");
    expect((await ops(get("/metrics"), "203.0.113.7"))?.status).toBe(403);
  });

  test.each([
    ["x-forwarded-for", "203.0.113.7"],
    ["forwarded", "for=203.0.113.7"],
    ["x-real-ip", "203.0.113.7"],
  ])(
    "without a token, a loopback peer passing on a request (%s) is refused",
    async (name, value) => {
      const ops = opsHandler({ checks: {}, metrics, metricsContentType: "" });
      expect((await ops(get("/metrics", { [name]: value }), "127.0.0.1"))?.status).toBe(403);
    },
  );

  test("with a token, every peer needs it", async () => {
    const ops = opsHandler({ checks: {}, metrics, metricsContentType: "", metricsToken: "s3cret" });
    expect((await ops(get("/metrics"), "127.0.0.1"))?.status).toBe(403);
    const wrong = get("/metrics", { authorization: "Bearer nope" });
    expect((await ops(wrong, "203.0.113.7"))?.status).toBe(403);
    const right = get("/metrics", { authorization: "Bearer s3cret" });
    expect((await ops(right, "203.0.113.7"))?.status).toBe(200);
  });
});
