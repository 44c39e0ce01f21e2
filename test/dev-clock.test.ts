/**
 * The dev clock stays in dev: a control plane, worker and edge started without RELAY_DEV_CLOCK
 * on a database whose dev clock was moved run on real time. They get a Temporal namespace of
 * their own, so only this worker delivers what this edge accepts.
 */
import { Connection } from "@temporalio/client";
import { msToTs } from "@temporalio/common";
import { afterAll, beforeAll, expect, test } from "vitest";
import { searchAttributes } from "../core/temporal.ts";
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import {
  api,
  eventually,
  projectWithEndpoint,
  relay,
  stack,
  stackLog,
  targetServer,
} from "./helpers.ts";

const DAY_S = 86_400;
/** temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD */
const KEYWORD = 2;
const NAMESPACE = "relay-real-time";
const [controlPort = 0, workerPort = 0, edgePort = 0] = await freePorts(3);
const realTime = () => ({
  DATABASE_URL: stack().databaseUrl,
  TEMPORAL_ADDRESS: stack().temporalAddress,
  TEMPORAL_HTTP_ADDRESS: stack().temporalHttpAddress,
  TEMPORAL_NAMESPACE: NAMESPACE,
  RELAY_ADMIN_TOKEN: stack().adminToken,
  RELAY_EDGE_TOKEN: stack().edgeToken,
  RELAY_ENCRYPTION_KEY: stack().encryptionKey,
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  RELAY_EDGE_DOMAIN: `localhost:${edgePort}`,
});
const processes = {
  control: new ManagedProcess(
    {
      name: "control-real-time",
      entry: "control/main.ts",
      readyLine: "control plane listening",
      env: { ...realTime(), RELAY_CONTROL_PORT: String(controlPort) },
    },
    stackLog(),
  ),
  worker: new ManagedProcess(
    {
      name: "worker-real-time",
      entry: "workflows/worker.ts",
      readyLine: "worker polling",
      env: { ...realTime(), RELAY_WORKER_PORT: String(workerPort) },
    },
    stackLog(),
  ),
  edge: new ManagedProcess(
    {
      name: "edge-real-time",
      entry: "edge/main.ts",
      readyLine: "edge listening",
      env: {
        ...realTime(),
        RELAY_EDGE_PORT: String(edgePort),
        RELAY_CONTROL_URL: `http://127.0.0.1:${controlPort}`,
      },
    },
    stackLog(),
  ),
};
const edge = { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort };
const sink = await targetServer();

async function registerNamespace() {
  const connection = await Connection.connect({ address: stack().temporalAddress });
  try {
    await connection.workflowService
      .registerNamespace({
        namespace: NAMESPACE,
        workflowExecutionRetentionPeriod: msToTs("1 day"),
      })
      .catch((error: { code?: number }) => {
        if (error.code !== 6) throw error; // ALREADY_EXISTS
      });
    await eventually(() =>
      connection.workflowService.describeNamespace({ namespace: NAMESPACE }).then(
        () => true,
        () => false,
      ),
    );
    await connection.operatorService.addSearchAttributes({
      namespace: NAMESPACE,
      searchAttributes: Object.fromEntries(
        Object.values(searchAttributes).map((name) => [name, KEYWORD]),
      ),
    });
  } finally {
    await connection.close();
  }
}

beforeAll(async () => {
  // The shared dev clock runs days ahead, as after the acceptance flow.
  const moved = await api(stack().adminToken, "POST", "/admin/clock", {
    advanceSeconds: 4 * DAY_S,
  });
  expect(moved.body.offsetMs).toBeGreaterThanOrEqual(4 * DAY_S * 1000);
  await registerNamespace();
  await processes.control.start();
  await Promise.all([processes.worker.start(), processes.edge.start()]);
});
afterAll(async () => {
  await Promise.all(Object.values(processes).map((p) => p.stop()));
  await sink.close();
});

test("a worker without RELAY_DEV_CLOCK signs deliveries with real time", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge });
  expect(answer.status).toBe(202);
  const delivered = await eventually(async () =>
    sink.received.find((r) => r.headers["x-relay-request-id"] === answer.json().requestId),
  );
  const signedAt = Number(delivered.headers["webhook-timestamp"]) * 1000;
  expect(Math.abs(signedAt - Date.now())).toBeLessThan(60_000);
});

test("a control plane and edge without RELAY_DEV_CLOCK judge keys on real time", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const control = `http://127.0.0.1:${controlPort}`;
  // Minted at real time for a day: the dev-clock edge, days ahead, finds it long expired.
  const minted = await api<{ key: { expiresAt: string }; plaintext: string }>(
    p.ownerToken,
    "POST",
    `${p.base}/keys`,
    { name: "real", mode: "live", ttlDays: 1 },
    control,
  );
  expect(
    Math.abs(Date.parse(minted.body.key.expiresAt) - (Date.now() + DAY_S * 1000)),
  ).toBeLessThan(60_000);
  const onRealTime = await relay(p.slug, "/v1/hook", {
    key: minted.body.plaintext,
    body: "{}",
    edge,
  });
  expect(onRealTime.status).toBe(202);
  expect(onRealTime.headers["x-relay-key-status"]).toBeUndefined();
  const onDevClock = await relay(p.slug, "/v1/hook", { key: minted.body.plaintext, body: "{}" });
  expect(onDevClock.json().error.code).toBe("key_expired");
});

test("without RELAY_DEV_CLOCK the dev-clock routes do not exist, whatever the token", async () => {
  const control = `http://127.0.0.1:${controlPort}`;
  const statuses: number[] = [];
  for (const path of ["/admin/clock", "/admin/rotation/run"]) {
    for (const token of [stack().adminToken, "rmt_wrong", null]) {
      statuses.push((await api(token, "POST", path, { advanceSeconds: 1 }, control)).status);
    }
  }
  expect(statuses).toEqual([404, 404, 404, 404, 404, 404]);
});
