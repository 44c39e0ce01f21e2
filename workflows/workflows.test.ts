/**
 * The workflows besides deliverRequest (./deliver-request.test.ts), on mocked activities
 * (test/workflow-worker.ts): a batch, a sync call, a stream's record, the schedules, a circuit
 * and a notification; and deliveries with the payload codec, sealed in their histories.
 *
 * `RECORD_HISTORIES=1 npx vitest run workflows/deliver-request.test.ts workflows/workflows.test.ts`
 * also writes the runs that name a history to workflows/histories/, which replay.test.ts replays
 * on every later change.
 */
import { fileURLToPath } from "node:url";
import { Client } from "@temporalio/client";
import { Worker } from "@temporalio/worker";
import { expect, test } from "vitest";
import type { StreamRecord, SyncInput } from "../core/delivery.ts";
import type { DeliveryTarget } from "../core/model.ts";
import type { NotificationEvent } from "../core/notifications.ts";
import { PayloadCipher } from "../core/payload-codec.ts";
import { HAND_ON_SIGNAL } from "../core/temporal.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import {
  activities,
  attemptsOf,
  busyTimes,
  callsOf,
  delivery,
  env,
  nextId,
  recordHistory,
  relayStatus,
  script,
  start,
  target,
  taskQueue,
  timers,
  withMockedWorker,
} from "../test/workflow-worker.ts";
import type {
  deliverBatch,
  deliverRequest,
  pruneRequestLog,
  recordStream,
  relaySync,
  relaySyncBatch,
  rotateKeys,
  sendNotification,
  targetCircuit,
} from "./workflows.ts";

withMockedWorker();

test("deliverBatch settles the requests its attempts ended, retries briefly in itself, and continues the rest as their own workflows", async () => {
  const fine = target("fine");
  const flaky = target("flaky");
  const rejecting = target("rejecting");
  const shared = target("shared");
  const later = target("later");
  script.set(flaky.id, [{ status: 503 }, { status: 503 }, { status: 200 }]);
  script.set(rejecting.id, [{ status: 404 }]);
  busyTimes.set(shared.id, 1);
  script.set(later.id, [{ status: 503, retryAfter: "120" }, { status: 200 }]);
  const requests = [fine, flaky, rejecting, shared, later].map((t) => delivery([t]));
  const [delivered, retried, failed, waitedForShare, goesOn] = requests.map((r) =>
    String(r.requestId),
  ) as [string, string, string, string, string];
  const batch = await env.client.workflow.start<typeof deliverBatch>("deliverBatch", {
    taskQueue,
    workflowId: nextId("batch"),
    args: [{ project: "acme", requests }],
  });
  // Only the one whose retry is more than a minute away goes on as a workflow of its own.
  expect(await batch.result()).toBe(1);
  await recordHistory(batch, "batch-waited-for-time");
  // Retries a backoff away, and a turn its project's share had no room for: in the batch.
  expect(attemptsOf(retried).map((a) => `${a.via} ${a.status}`)).toEqual([
    "firstAttempt 503",
    "firstAttempt 503",
    "firstAttempt 200",
  ]);
  expect(attemptsOf(waitedForShare).map((a) => `${a.via} ${a.status}`)).toEqual([
    "firstAttempt 200",
  ]);
  for (const endedInBatch of [delivered, retried, failed, waitedForShare]) {
    await expect(env.client.workflow.getHandle(endedInBatch).describe()).rejects.toThrow();
  }
  const own = env.client.workflow.getHandle(goesOn);
  expect((await own.describe()).type).toBe("deliverRequest");
  expect(await timers(own)).toEqual([120_000]);
  await own.cancel();
  expect(await own.result()).toBe("cancelled");
  // The one that failed for good raised request.failed (its notification's workflow), as its own would.
  const notification = (id: unknown) => env.client.workflow.getHandle(`request.failed.${id}`);
  expect((await notification(failed).describe()).type).toBe("sendNotification");
  await expect(notification(delivered).describe()).rejects.toThrow();
});

test("a request failed for good raises its notification only where its project set a notification URL", async () => {
  const rejecting = target("gone");
  script.set(rejecting.id, [{ status: 404 }, { status: 404 }]);
  const told = delivery([rejecting]);
  const quiet = { ...delivery([rejecting]), project: "quiet" };
  const notification = (id: string) => env.client.workflow.getHandle(`request.failed.${id}`);
  for (const request of [told, quiet]) expect(await (await start(request)).result()).toBe("failed");
  await recordHistory(
    env.client.workflow.getHandle(quiet.requestId),
    "request-failed-in-a-project-without-notifications",
  );
  expect((await notification(told.requestId).describe()).type).toBe("sendNotification");
  await expect(notification(quiet.requestId).describe()).rejects.toThrow();
});

test("deliverBatch of delayed requests opens them scheduled, waits for the last one's time, and hands one on with the wait it has left", async () => {
  const later = target("later");
  const requests = [1, 2, 3].map(() => {
    const request = delivery([later]);
    const at = Date.parse(request.receivedAt);
    return { ...request, notBefore: new Date(at + 1500).toISOString() };
  });
  const [handedOn, ...waited] = requests.map((r) => String(r.requestId)) as [string, ...string[]];
  const batch = await env.client.workflow.start<typeof deliverBatch>("deliverBatch", {
    taskQueue,
    workflowId: nextId("batch"),
    args: [{ project: "acme", requests }],
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  await batch.signal(HAND_ON_SIGNAL, handedOn);
  expect(await batch.result()).toBe(1);
  await recordHistory(batch, "batch-delayed");
  expect(callsOf("openScheduled").at(-1)?.args).toEqual([requests.map((r) => r.requestId)]);
  const due = Date.parse(requests[2]?.notBefore ?? "");
  for (const id of waited) {
    const [attempt] = attemptsOf(id);
    expect(attempt?.at).toBeGreaterThanOrEqual(due);
  }
  // Its own workflow waits what was left (less than the whole delay), then delivers.
  const own = env.client.workflow.getHandle(handedOn);
  expect(await own.result()).toBe("delivered");
  const [left] = await timers(own);
  expect(left).toBeLessThan(1500);
  expect(left).toBeGreaterThan(500);
});

test("requests a batch hands on after its activity's answer was lost deliver nothing again that the log shows delivered", async () => {
  const fine = target("fine");
  const requests = [delivery([fine]), delivery([fine])];
  const batch = await env.client.workflow.start<typeof deliverBatch>("deliverBatch", {
    taskQueue,
    workflowId: nextId("batch"),
    args: [{ project: "lost-batch", requests }],
  });
  expect(await batch.result()).toBe(2);
  for (const { requestId } of requests) {
    expect(await env.client.workflow.getHandle(String(requestId)).result()).toBe("delivered");
    expect(attemptsOf(String(requestId)).map((a) => `${a.via} ${a.status}`)).toEqual([
      "firstAttempt 200",
    ]);
  }
});

function sync(target: DeliveryTarget, ownsStatus: boolean) {
  const { targets: _, ...input } = delivery([target]);
  return env.client.workflow.start<typeof relaySync>("relaySync", {
    taskQueue,
    workflowId: input.requestId,
    args: [{ ...input, target, ownsStatus }],
  });
}

test("relaySync answers the target's answer and sets the request's status when it owns it", async () => {
  const echo = target("echo", "sync");
  const handle = await sync(echo, true);
  expect(await handle.result()).toEqual({
    kind: "answered",
    status: 200,
    headers: {},
    bodyBase64: "b2s=",
  });
  expect(await relayStatus(handle)).toBe("delivered");
  await recordHistory(handle, "sync-answered");

  const mixed = await sync(echo, false);
  expect((await mixed.result()).kind).toBe("answered");
  expect(await relayStatus(mixed)).toBeUndefined();
});

test("relaySync answers a failed call as such, and a failed activity is not retried", async () => {
  const down = target("down", "sync");
  script.set(down.id, [{ error: "ECONNREFUSED" }]);
  const handle = await sync(down, true);
  expect(await handle.result()).toEqual({ kind: "unreachable", error: "ECONNREFUSED" });
  expect(await relayStatus(handle)).toBe("failed");

  const crashing = target("crashing", "sync");
  script.set(crashing.id, []);
  const failed = await sync(crashing, true);
  await expect(failed.result()).rejects.toThrow("Workflow execution failed");
  const tries = callsOf("relaySyncCall").filter(
    (c) => (c.args[0] as SyncInput).target.id === crashing.id,
  );
  expect(tries).toHaveLength(1);
});

test("relaySyncBatch answers what its one activity did with each call, and the activity is not retried", async () => {
  const { targets: _, ...input } = delivery([target("gathered", "sync")]);
  const calls = [1, 2].map((n) => ({
    ...input,
    requestId: `${input.requestId}-${n}`,
    target: target(`gathered-${n}`, "sync"),
    ownsStatus: true,
  }));
  const handle = await env.client.workflow.start<typeof relaySyncBatch>("relaySyncBatch", {
    taskQueue,
    workflowId: nextId("sync-batch"),
    args: [calls],
  });
  // No listener of this test's worker waits for them (workflows/sync-answers.ts).
  expect(await handle.result()).toEqual(["not waited for here", "not waited for here"]);
  expect(callsOf("relaySyncCallsHere").filter((c) => c.args[0] === calls.length)).toHaveLength(1);
  await recordHistory(handle, "sync-batch-elsewhere");
});

test("recordStream, rotateKeys and pruneRequestLog answer their activity's answer", async () => {
  const streamed = target("streamed", "stream");
  const { targets: _, ...request } = delivery([streamed]);
  const record: StreamRecord = {
    ...request,
    target: streamed,
    ownsStatus: true,
    statusCode: 200,
    latencyMs: 12,
    bytes: 34,
    error: null,
  };
  const stream = await env.client.workflow.start<typeof recordStream>("recordStream", {
    taskQueue,
    workflowId: request.requestId,
    args: [record],
  });
  await stream.result();
  expect(callsOf("recordStreamCall").at(-1)?.args).toEqual([record]);

  const rotation = await env.client.workflow.start<typeof rotateKeys>("rotateKeys", {
    taskQueue,
    workflowId: nextId("rotate"),
  });
  expect(await rotation.result()).toBe(3);
  await recordHistory(rotation, "keys-rotated");

  const retention = await env.client.workflow.start<typeof pruneRequestLog>("pruneRequestLog", {
    taskQueue,
    workflowId: nextId("prune"),
  });
  expect(await retention.result()).toEqual({
    requests: 5,
    content: 0,
    bodies: 2,
    idempotencyKeys: 0,
    laneEntries: 0,
    recoveries: 0,
    holds: 1,
    scheduled: 0,
    deletedProjects: 0,
  });
  await recordHistory(retention, "log-pruned");
});

test("targetCircuit ends when its target is gone; sendNotification answers notify's answer", async () => {
  const circuit = await env.client.workflow.start<typeof targetCircuit>("targetCircuit", {
    taskQueue,
    workflowId: nextId("circuit"),
    args: [{ targetId: "gone" }],
  });
  await circuit.result();
  await recordHistory(circuit, "circuit-target-gone");

  const event: NotificationEvent = {
    id: nextId("evt"),
    type: "request.failed",
    project: "acme",
    at: new Date().toISOString(),
    data: {},
  };
  const sent = await env.client.workflow.start<typeof sendNotification>("sendNotification", {
    taskQueue,
    workflowId: event.id,
    args: [event],
  });
  expect(await sent.result()).toBe("none");
  expect(callsOf("notify").at(-1)?.args).toEqual([event]);
  await recordHistory(sent, "notification-sent");
});

/** A history as text, its payloads' data as UTF-8: what anyone reading Temporal's store sees. */
const historyText = (history: unknown) =>
  JSON.stringify(history, (name, value) => {
    if (value instanceof Uint8Array) return new TextDecoder().decode(value);
    return name === "data" && typeof value === "string"
      ? Buffer.from(value, "base64").toString()
      : value;
  });

/** The secret sealed histories here were recorded with; replay.test.ts opens them with it. */
const RECORDING_PAYLOAD_SECRET = "5e".repeat(32);

test("with the payload codec, a delivery and a sync call run as before and no input or answer is in clear in their histories", async () => {
  const converter = relayDataConverter(await PayloadCipher.fromSecrets([RECORDING_PAYLOAD_SECRET]));
  const sealedQueue = `${taskQueue}-sealed`;
  const sealedWorker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: sealedQueue,
    workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
    activities,
    dataConverter: converter,
  });
  const client = new Client({ connection: env.connection, dataConverter: converter });
  await sealedWorker.runUntil(async () => {
    const flaky = target("sealed");
    script.set(flaky.id, [{ status: 503 }, { status: 200 }]);
    const input = delivery([flaky]);
    const handle = await client.workflow.start<typeof deliverRequest>("deliverRequest", {
      taskQueue: sealedQueue,
      workflowId: input.requestId,
      args: [input],
    });
    expect(await handle.result()).toBe("delivered");
    expect(attemptsOf(input.requestId).map((a) => a.status)).toEqual([503, 200]);
    const stored = historyText(await handle.fetchHistory());
    expect(stored).toContain(btoa("binary/encrypted"));
    for (const secret of [flaky.targetUrl, input.bodyBase64]) {
      expect(stored).not.toContain(secret);
    }
    await recordHistory(handle, "sealed-retried-once");

    const echo = target("sealed-echo", "sync");
    const { targets: _, ...syncInput } = delivery([echo]);
    const sync = await client.workflow.start<typeof relaySync>("relaySync", {
      taskQueue: sealedQueue,
      workflowId: syncInput.requestId,
      args: [{ ...syncInput, target: echo, ownsStatus: true }],
    });
    expect(await sync.result()).toMatchObject({ kind: "answered", bodyBase64: "b2s=" });
    expect(historyText(await sync.fetchHistory())).not.toContain("b2s=");
    await recordHistory(sync, "sealed-sync-answered");
  });
}, 120_000);
