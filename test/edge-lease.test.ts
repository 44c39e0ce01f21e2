/**
 * Revocation reaches every edge before DELETE returns. Edge B reaches the control plane through
 * a proxy the test can cut: cut briefly, B keeps serving from cache; cut past its lease, B fails
 * closed, and DELETE waits for B's lease to run out rather than for B.
 */
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { api, extraEdge, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";
import { cuttableProxy } from "./proxies.ts";

const LEASE_MS = 1500;

const sink = await targetServer();
const proxy = await cuttableProxy(new URL(stack().controlUrl));
const [edgeBPort = 0] = await freePorts(1);
const edgeB = extraEdge("edge-b", edgeBPort, {
  RELAY_CONTROL_URL: proxy.url,
  RELAY_EDGE_LEASE_MS: String(LEASE_MS),
});

beforeAll(() => edgeB.start());
afterAll(async () => {
  await edgeB.stop();
  await proxy.close();
  await sink.close();
});

async function callB(project: string, key: string) {
  const response = await request(`http://127.0.0.1:${edgeBPort}/v1/hook`, {
    method: "POST",
    headers: {
      host: `${project}.localhost`,
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
    },
    body: "{}",
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    code: text.includes('"error"') ? JSON.parse(text).error.code : null,
  };
}

/**
 * Warms B's cache with the project and key. The key's own mint reaches B through the change
 * feed about when the first lookup runs, and a lookup racing a change to its entry is not
 * cached, so B is called until the feed has gone quiet for it.
 */
async function warm(project: string, key: string) {
  for (let i = 0; i < 3; i++) {
    expect((await callB(project, key)).status).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

test("an edge cut off for less than its lease keeps serving from its cache", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  await warm(p.slug, p.key);
  proxy.cut();
  try {
    expect((await callB(p.slug, p.key)).status).toBe(202);
  } finally {
    proxy.restore();
  }
});

test("DELETE returns once live edges acknowledge; a cut-off edge fails closed, then catches up", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const [minted] = (await api<{ keys: { id: string }[] }>(p.ownerToken, "GET", `${p.base}/keys`))
    .body.keys;
  // Both edges hold the key in their caches, so B could only refuse it by having its lease
  // run out: were DELETE to return sooner, B would still answer 202 from its cache.
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(202);
  await warm(p.slug, p.key);

  proxy.cut();
  try {
    const started = Date.now();
    const revoked = await api(p.ownerToken, "DELETE", `${p.base}/keys/${minted?.id}`);
    const waitedMs = Date.now() - started;
    expect(revoked.status).toBe(200);
    // It waited for B's lease to run out (B could not acknowledge): at most one lease, the
    // rest of whatever B held when it was cut off.
    expect(waitedMs).toBeLessThan(LEASE_MS + 2000);
    // ...and by the time it answered, no edge accepts the key.
    const a = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(a.status).toBe(401);
    expect(a.json().error.code).toBe("key_revoked");
    expect(await callB(p.slug, p.key)).toEqual({ status: 503, code: "unavailable" });
    // ...which its readiness says, so a load balancer can take it out meanwhile.
    const ready = await request(`http://127.0.0.1:${edgeBPort}/readyz`);
    expect(ready.statusCode).toBe(503);
    expect(await ready.body.json()).toMatchObject({
      status: "unavailable",
      checks: { controlPlane: "not caught up with the control plane's changes", temporal: "ok" },
    });
  } finally {
    proxy.restore();
  }
  await expect
    .poll(() => callB(p.slug, p.key), { timeout: 10_000 })
    .toEqual({ status: 401, code: "key_revoked" });
});
