/**
 * The log's retention: once a finished request is older than RELAY_LOG_RETENTION_DAYS (30), the
 * daily run removes it with its attempts and its stored body. The dev clock crosses the 30 days.
 */
import postgres from "postgres";
import { afterAll, expect, test } from "vitest";
import { RETENTION_WORKFLOW } from "../core/temporal.ts";
import { runScheduledNow } from "../platform/temporal.ts";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = postgres(stack().databaseUrl, { max: 1 });
const temporal = await relayTemporal();
const healthy = await targetServer();
let stuckAnswers = 0;
const stuck = await targetServer(() => {
  stuckAnswers++;
  return { status: 503 };
});
afterAll(async () => {
  await Promise.all([healthy.close(), stuck.close(), sql.end()]);
  await temporal.connection.close();
});

const storedBodies = async (requestId: string) =>
  (await sql`select 1 from bodies where request_id = ${requestId}`).length;

test("a finished request leaves the log with its stored body once retention ends", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: healthy.url }]);
  const large = JSON.stringify({ blob: "x".repeat(300 * 1024) }); // travels by reference
  const sent = await relay(p.slug, "/v1/hook", { key: p.key, body: large });
  expect(sent.status).toBe(202);
  const finished = sent.json().requestId as string;
  expect((await finishedLog(p, finished)).status).toBe("delivered");
  expect(await storedBodies(finished)).toBe(1);

  const retrying = await projectWithEndpoint([{ name: "t", targetUrl: stuck.url }]);
  const pending = (
    await relay(retrying.slug, "/v1/hook", { key: retrying.key, body: large })
  ).json().requestId as string;
  await eventually(async () => stuckAnswers > 0);

  const admin = (path: string, body?: unknown) => api(stack().adminToken, "POST", path, body);
  expect((await admin("/admin/clock", { advanceSeconds: 31 * 86_400 })).status).toBe(200);
  const recent = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json()
    .requestId as string;
  await finishedLog(p, recent);

  const pruned = await runScheduledNow<{ requests: number; bodies: number }>(
    temporal,
    RETENTION_WORKFLOW,
  );
  expect(pruned.requests).toBeGreaterThanOrEqual(1);
  expect(pruned.bodies).toBeGreaterThanOrEqual(1);

  expect((await api(p.ownerToken, "GET", `${p.base}/requests/${finished}`)).status).toBe(404);
  expect(await storedBodies(finished)).toBe(0);
  expect((await api(p.ownerToken, "GET", `${p.base}/requests/${recent}`)).status).toBe(200);
  // Still being retried: its log entry and its body stay, however old.
  const still = await api(retrying.ownerToken, "GET", `${retrying.base}/requests/${pending}`);
  expect(still.body.status).toBe("delivering");
  expect(await storedBodies(pending)).toBe(1);
  await temporal.workflow.getHandle(pending).terminate("test over");
});
