/**
 * The workflows alone: each runs on a Temporal dev server (the project's own CLI, started by
 * `TestWorkflowEnvironment.createLocal`) in a worker whose activities are mocks that follow a
 * per-target script and log every call. The stack's tests cover the activities' I/O; these cover
 * what the workflows decide: which targets, how long between attempts, what status results.
 *
 * `RECORD_HISTORIES=1 npx vitest run workflows/workflows.test.ts` also writes the runs that name
 * a history to workflows/histories/, which replay.test.ts replays on every later change.
 */
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { ApplicationFailure, Context } from "@temporalio/activity";
import { Client, type WorkflowHandle } from "@temporalio/client";
import { defineSearchAttributeKey } from "@temporalio/common";
import proto from "@temporalio/proto";
import { TestWorkflowEnvironment } from "@temporalio/testing";
import { DefaultLogger, Runtime, Worker } from "@temporalio/worker";
import { afterAll, beforeAll, expect, test } from "vitest";
import { defaultCircuitBreaker } from "../core/circuit.ts";
import {
  attemptVerdict,
  classifyStatus,
  type DeliveryInput,
  type StreamRecord,
  type SyncInput,
  type SyncOutcome,
} from "../core/delivery.ts";
import type { DeliveryTarget, RequestStatus } from "../core/model.ts";
import type { NotificationEvent } from "../core/notifications.ts";
import { PayloadCipher } from "../core/payload-codec.ts";
import { ProjectSlots } from "../core/project-slots.ts";
import { searchAttributes, searchAttributeType } from "../core/temporal.ts";
import { findTemporalCli } from "../dev/temporal.ts";
import { devServerFlags, temporalDynamicConfig } from "../dev/temporal-config.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import type { Activities } from "./activities.ts";
import type { RetryPolicy } from "./activity-deps.ts";
import { firstAttemptsOfBatch } from "./batch-attempts.ts";
import type { DeliverInput, FirstAttempt, RequestRow } from "./deliveries.ts";
import type {
  deliverBatch,
  deliverRequest,
  pruneRequestLog,
  recordStream,
  relaySync,
  rotateKeys,
  sendNotification,
  targetCircuit,
} from "./workflows.ts";

// The worker's state changes at INFO would fill the test output.
Runtime.install({ logger: new DefaultLogger("WARN") });

/** Short waits, so retries take a fraction of a second. */
const policy: RetryPolicy = {
  initialIntervalMs: 200,
  backoffCoefficient: 2,
  maximumIntervalMs: 2000,
  windowMs: 60_000,
  attemptTimeoutMs: 10_000,
};

/** What a mocked target does on one attempt: answers, or cannot be reached; the last repeats. */
type Answer = { status: number; retryAfter?: string } | { error: string };

/** One attempt a mock made, as the request log would hold it. */
interface Attempt {
  requestId: string;
  targetId: string;
  /** Numbered per request and target, replays included, as the log numbers them. */
  attempt: number;
  via: "firstAttempt" | "deliver";
  /** Temporal's attempt number of the `deliver` activity. */
  temporalAttempt?: number;
  status: number | null;
  /** The wait the attempt's verdict named before the next one. */
  delayMs?: number;
  at: number;
}

const script = new Map<string, Answer[]>();
/** How many more times a target's project has no room for it on the worker (each a 300 ms wait). */
const busyTimes = new Map<string, number>();
const BUSY = { kind: "busy", waitMs: 300 } as const;

/** Whether the worker turns this delivery away now (busyTimes), counting it down. */
function turnedAway({ target }: DeliverInput): boolean {
  const left = busyTimes.get(target.id) ?? 0;
  if (left > 0) busyTimes.set(target.id, left - 1);
  return left > 0;
}
const attempts: Attempt[] = [];
const calls: { name: keyof Activities; args: unknown[] }[] = [];

const attemptsOf = (requestId: string) => attempts.filter((a) => a.requestId === requestId);
const callsOf = (name: keyof Activities) => calls.filter((c) => c.name === name);

/** Tries `delivery`'s target once by its script and logs the attempt. */
function attempt(delivery: DeliverInput, via: Attempt["via"]) {
  const { requestId, target } = delivery;
  const number = attemptsOf(requestId).filter((a) => a.targetId === target.id).length + 1;
  const answers = script.get(target.id) ?? [{ status: 200 }];
  const answer = answers[Math.min(number, answers.length) - 1] ?? { status: 200 };
  const seen =
    "error" in answer
      ? { status: null, retryAfter: null, error: answer.error, refused: false }
      : {
          status: answer.status,
          retryAfter: answer.retryAfter ?? null,
          error: null,
          refused: false,
        };
  const verdict = attemptVerdict(seen, number, policy, new Date());
  attempts.push({
    requestId,
    targetId: target.id,
    attempt: number,
    via,
    ...(via === "deliver" && { temporalAttempt: Context.current().info.attempt }),
    status: seen.status,
    ...(verdict.kind === "retry" && { delayMs: verdict.delayMs }),
    at: Date.now(),
  });
  return verdict;
}

/** The request's status from all of its attempts, as the log settles it. */
function settled(requestId: string): RequestStatus {
  const targets = new Map<string, boolean>();
  for (const a of attemptsOf(requestId)) {
    const ok = a.status !== null && classifyStatus(a.status) === "delivered";
    targets.set(a.targetId, (targets.get(a.targetId) ?? false) || ok);
  }
  const delivered = [...targets.values()];
  if (delivered.every(Boolean)) return "delivered";
  return delivered.some(Boolean) ? "partially_failed" : "failed";
}

/** Every activity the workflows call, by the real ones' names and signatures, logging calls. */
const activities: Activities = {
  async retryPolicy() {
    calls.push({ name: "retryPolicy", args: [] });
    return policy;
  },
  async openRequest(request: RequestRow, status?: "scheduled" | "delivering") {
    calls.push({ name: "openRequest", args: status ? [request, status] : [request] });
  },
  async cancelRequest(request: RequestRow) {
    calls.push({ name: "cancelRequest", args: [request] });
    return "cancelled";
  },
  // Targets never wait here: test/circuits.test.ts runs circuits on the real stack.
  async holdDelivery() {
    return null;
  },
  async circuitState() {
    return {
      hold: null,
      openedAtMs: null,
      breaker: defaultCircuitBreaker,
      waiting: 0,
      exists: false,
      target: null,
    };
  },
  async releaseHeld() {
    return [];
  },
  async recordProbeFailed() {},
  async disableTarget() {
    return false;
  },
  async notify(event: NotificationEvent) {
    calls.push({ name: "notify", args: [event] });
    return "none" as const;
  },
  async settleRequest(requestId: string) {
    calls.push({ name: "settleRequest", args: [requestId] });
    return settled(requestId);
  },
  async firstAttempt(request: RequestRow, delivery: DeliverInput, only: boolean) {
    calls.push({ name: "firstAttempt", args: [request, delivery, only] });
    if (turnedAway(delivery)) return BUSY;
    const verdict = attempt(delivery, "firstAttempt");
    const ends = only && verdict.kind !== "retry";
    const answer: FirstAttempt = {
      ...verdict,
      ...(ends && { settled: settled(delivery.requestId) }),
    };
    return answer;
  },
  firstAttemptsOfBatch(project: string, requests: DeliveryInput[]) {
    calls.push({ name: "firstAttemptsOfBatch", args: [requests.map((r) => r.requestId)] });
    return firstAttemptsOfBatch(
      {
        attempt: (request, delivery, only) => activities.firstAttempt(request, delivery, only),
        settle: (requestId) => activities.settleRequest(requestId),
        slots: new ProjectSlots({ slots: 100, perProject: 100 }),
      },
      project,
      requests,
    );
  },
  async deliver(input: DeliverInput) {
    calls.push({ name: "deliver", args: [input] });
    if (turnedAway(input)) return BUSY;
    const verdict = attempt(input, "deliver");
    if (verdict.kind === "delivered") return verdict.status;
    throw ApplicationFailure.create({
      message: verdict.message,
      type: verdict.type,
      ...(verdict.kind === "failed" ? { nonRetryable: true } : { nextRetryDelay: verdict.delayMs }),
    });
  },
  async relaySyncCall(input: SyncInput): Promise<SyncOutcome> {
    calls.push({ name: "relaySyncCall", args: [input] });
    const [answer] = script.get(input.target.id) ?? [{ status: 200 }];
    if (!answer) throw new Error("the worker lost its database");
    if ("error" in answer) return { kind: "unreachable", error: answer.error };
    return { kind: "answered", status: answer.status, headers: {}, bodyBase64: "b2s=" };
  },
  async recordStreamCall(record: StreamRecord) {
    calls.push({ name: "recordStreamCall", args: [record] });
  },
  async rotateExpiringKeys() {
    calls.push({ name: "rotateExpiringKeys", args: [] });
    return 3;
  },
  async pruneExpiredRequests() {
    calls.push({ name: "pruneExpiredRequests", args: [] });
    return { requests: 5, bodies: 2, holds: 1, scheduled: 0 };
  },
};

const taskQueue = "workflow-tests";
let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: "existing-path", path: await findTemporalCli() },
      extraArgs: devServerFlags(temporalDynamicConfig),
      searchAttributes: Object.values(searchAttributes).map((name) =>
        defineSearchAttributeKey(
          name,
          searchAttributeType(name) === "KeywordList" ? "KEYWORD_LIST" : "KEYWORD",
        ),
      ),
    },
  });
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
    activities,
  });
  running = worker.run();
}, 120_000);

afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

let ids = 0;
const nextId = (what: string) => `${what}-${Date.now()}-${++ids}`;

function target(name: string, deliveryMode: DeliveryTarget["deliveryMode"] = "async") {
  return {
    id: nextId(name),
    name,
    targetUrl: `http://${name}.example/hook`,
    deliveryMode,
    timeoutSeconds: 5,
    headers: {},
  };
}

function delivery(targets: DeliveryTarget[]): DeliveryInput {
  return {
    requestId: nextId("req"),
    project: "acme",
    line: "orders",
    endpoint: "/v1/hook",
    keyMode: "live",
    receivedAt: new Date().toISOString(),
    headers: { "content-type": "application/json" },
    bodyBase64: "eyJuIjoxfQ==",
    bodyBytes: 7,
    targets,
  };
}

function start(input: DeliveryInput, workflowId = input.requestId) {
  return env.client.workflow.start<typeof deliverRequest>("deliverRequest", {
    taskQueue,
    workflowId,
    args: [input],
  });
}

const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");

/** The RelayStatus search attribute the workflow set last, if any. */
async function relayStatus(handle: WorkflowHandle) {
  return (await handle.describe()).typedSearchAttributes.get(statusKey);
}

/** The durations of the workflow's timers, in ms. */
async function timers(handle: WorkflowHandle) {
  const { events } = await handle.fetchHistory();
  return (events ?? []).flatMap((e) => {
    const wait = e.timerStartedEventAttributes?.startToFireTimeout;
    return wait ? [Number(wait.seconds ?? 0) * 1000 + (wait.nanos ?? 0) / 1e6] : [];
  });
}

/** With RECORD_HISTORIES=1, keeps the run's history for replay.test.ts. */
async function recordHistory(handle: WorkflowHandle, name: string) {
  if (!process.env.RECORD_HISTORIES) return;
  const history = proto.temporal.api.history.v1.History.encode(await handle.fetchHistory());
  await writeFile(new URL(`./histories/${name}.bin`, import.meta.url), history.finish());
}

test("deliverRequest retries by the backoff each attempt names, until delivered", async () => {
  const flaky = target("flaky");
  script.set(flaky.id, [
    { status: 503 },
    { status: 503 },
    { error: "ECONNRESET" },
    { status: 200 },
  ]);
  const handle = await start(delivery([flaky]));

  expect(await handle.result()).toBe("delivered");
  const tried = attemptsOf(handle.workflowId);
  expect(tried.map((a) => [a.via, a.temporalAttempt, a.delayMs])).toEqual([
    ["firstAttempt", undefined, 200],
    ["deliver", 1, 400],
    ["deliver", 2, 800],
    ["deliver", 3, undefined],
  ]);
  // The first retry waits on a workflow timer; later ones on the activity's retry.
  expect(await timers(handle)).toEqual([200]);
  for (const [i, a] of tried.slice(1).entries()) {
    const before = tried[i] as Attempt;
    expect(a.at - before.at).toBeGreaterThanOrEqual(before.delayMs as number);
  }
  expect(await relayStatus(handle)).toBe("delivered");
});

test("deliverRequest waits a longer Retry-After, on the first attempt and on later ones", async () => {
  const busy = target("busy");
  script.set(busy.id, [
    { status: 429, retryAfter: "1" },
    { status: 503, retryAfter: "1" },
    { status: 200 },
  ]);
  const handle = await start(delivery([busy]));

  expect(await handle.result()).toBe("delivered");
  const tried = attemptsOf(handle.workflowId);
  // The backoff alone would wait 200 ms, then 400 ms.
  expect(tried.map((a) => a.delayMs)).toEqual([1000, 1000, undefined]);
  expect(await timers(handle)).toEqual([1000]);
  const [first, second, third] = tried as [Attempt, Attempt, Attempt];
  expect(second.at - first.at).toBeGreaterThanOrEqual(1000);
  expect(third.at - second.at).toBeGreaterThanOrEqual(1000);
  await recordHistory(handle, "retried-after-retry-after");
});

test("deliverRequest settles a request with one target delivered and one failed as partially failed", async () => {
  const fine = target("fine");
  const broken = target("broken");
  const caller = target("caller", "sync");
  script.set(broken.id, [{ status: 503 }, { status: 404 }]);
  const handle = await start(delivery([fine, broken, caller]));

  expect(await handle.result()).toBe("partially_failed");
  expect(await relayStatus(handle)).toBe("partially_failed");
  const tried = attemptsOf(handle.workflowId);
  expect(tried.map((a) => `${a.targetId} ${a.via} ${a.status}`).sort()).toEqual(
    [
      `${fine.id} firstAttempt 200`,
      `${broken.id} firstAttempt 503`,
      `${broken.id} deliver 404`,
    ].sort(),
  );
  // A rejection is not retried: the one deliver is Temporal's first attempt.
  expect(tried.filter((a) => a.via === "deliver").map((a) => a.temporalAttempt)).toEqual([1]);
  await recordHistory(handle, "partially-failed");
});

test("deliverBatch settles the requests its first attempts ended and continues the rest as their own workflows", async () => {
  const fine = target("fine");
  const flaky = target("flaky");
  const rejecting = target("rejecting");
  script.set(flaky.id, [{ status: 503 }, { status: 200 }]);
  script.set(rejecting.id, [{ status: 404 }]);
  const requests = [delivery([fine]), delivery([flaky]), delivery([rejecting])];
  const [delivered, retried, failed] = requests.map((r) => r.requestId);
  const batch = await env.client.workflow.start<typeof deliverBatch>("deliverBatch", {
    taskQueue,
    workflowId: nextId("batch"),
    args: [{ project: "acme", requests }],
  });
  expect(await batch.result()).toBe(1);
  await recordHistory(batch, "batch-settled-and-continued");
  // Only the one that goes on has a workflow of its own; it retries from the batch's verdict.
  expect(await env.client.workflow.getHandle(String(retried)).result()).toBe("delivered");
  expect(attemptsOf(String(retried)).map((a) => `${a.via} ${a.status}`)).toEqual([
    "firstAttempt 503",
    "deliver 200",
  ]);
  await recordHistory(env.client.workflow.getHandle(String(retried)), "batch-continued-retried");
  for (const settledInBatch of [delivered, failed]) {
    await expect(
      env.client.workflow.getHandle(String(settledInBatch)).describe(),
    ).rejects.toThrow();
  }
  // The one that failed for good raised request.failed (its notification's workflow), as its own would.
  const notification = (id: unknown) => env.client.workflow.getHandle(`request.failed.${id}`);
  expect((await notification(failed).describe()).type).toBe("sendNotification");
  await expect(notification(delivered).describe()).rejects.toThrow();
});

test("a delivery its project's share turns away waits the worker's wait, holding no attempt, then delivers", async () => {
  const t = target("crowded");
  busyTimes.set(t.id, 2);
  const handle = await start(delivery([t]));
  expect(await handle.result()).toBe("delivered");
  // Turned away on the first try and on the next: two timers of the worker's 300 ms, then one
  // attempt, the request's first.
  expect(await timers(handle)).toEqual([300, 300]);
  const mine = (c: { args: unknown[] }) => JSON.stringify(c.args).includes(handle.workflowId);
  expect(callsOf("firstAttempt").filter(mine)).toHaveLength(1);
  expect(callsOf("deliver").filter(mine)).toHaveLength(2);
  expect(attemptsOf(handle.workflowId)).toMatchObject([
    { attempt: 1, via: "deliver", status: 200 },
  ]);
});

test("a replay of the failed targets tries only them and settles from all attempts", async () => {
  const fine = target("fine");
  const broken = target("broken");
  script.set(broken.id, [{ status: 404 }, { status: 200 }]);
  const original = delivery([fine, broken]);
  expect(await (await start(original)).result()).toBe("partially_failed");

  const firstAttempts = callsOf("firstAttempt").length;
  // As control/api/failures.ts replays: the original input, with only the failed targets.
  const replay = await start({ ...original, targets: [broken] }, `${original.requestId}-replay-1`);
  expect(await replay.result()).toBe("delivered");
  const replayed = callsOf("firstAttempt").slice(firstAttempts);
  expect(replayed.map((c) => (c.args[1] as DeliverInput).target.id)).toEqual([broken.id]);
  expect(replayed.map((c) => c.args[2])).toEqual([true]);
  expect(
    attemptsOf(original.requestId).map((a) => `${a.targetId} ${a.attempt} ${a.status}`),
  ).toEqual([`${fine.id} 1 200`, `${broken.id} 1 404`, `${broken.id} 2 200`]);
  expect(await relayStatus(replay)).toBe("delivered");
  await recordHistory(replay, "replayed-failed-target");
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
  expect(await retention.result()).toEqual({ requests: 5, bodies: 2, holds: 1, scheduled: 0 });
  await recordHistory(retention, "log-pruned");
});

/** An input asking to be delivered `delayMs` after it was received. */
function delayed(targets: DeliveryTarget[], delayMs: number): DeliveryInput {
  const input = delivery(targets);
  return { ...input, notBefore: new Date(Date.parse(input.receivedAt) + delayMs).toISOString() };
}

/** Resolves once the workflow has made `name`'s call. */
async function called(name: keyof Activities, requestId: string) {
  for (let i = 0; i < 200; i++) {
    if (calls.some((c) => c.name === name && JSON.stringify(c.args).includes(requestId))) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${name} call for ${requestId}`);
}

test("a delayed deliverRequest opens its request scheduled, waits on a timer, then delivers", async () => {
  const later = target("later");
  const input = delayed([later], 1500);
  const handle = await start(input);

  expect(await handle.result()).toBe("delivered");
  const { targets: _, headers: __, bodyBase64: ___, ...request } = input;
  expect(callsOf("openRequest").find((c) => c.args[1] === "scheduled")?.args[0]).toEqual(request);
  const [wait] = await timers(handle);
  expect(wait).toBeGreaterThan(1000);
  expect(wait).toBeLessThanOrEqual(1500);
  const [tried] = attemptsOf(input.requestId) as [Attempt];
  expect(tried.at - Date.parse(input.receivedAt)).toBeGreaterThanOrEqual(1500);
  await recordHistory(handle, "delayed");
});

test("a cancelled deliverRequest stops where it waits, makes no further attempt and ends cancelled", async () => {
  const waiting = target("waiting");
  const scheduled = await start(delayed([waiting], 60_000));
  await called("openRequest", scheduled.workflowId);
  await scheduled.cancel();
  expect(await scheduled.result()).toBe("cancelled");
  expect(attemptsOf(scheduled.workflowId)).toEqual([]);
  expect(callsOf("cancelRequest").map((c) => (c.args[0] as RequestRow).requestId)).toContain(
    scheduled.workflowId,
  );
  expect(await relayStatus(scheduled)).toBe("cancelled");
  await recordHistory(scheduled, "cancelled-while-scheduled");

  const down = target("down");
  script.set(down.id, [{ status: 503, retryAfter: "60" }]);
  const retrying = await start(delivery([down]));
  await called("firstAttempt", retrying.workflowId);
  await retrying.cancel();
  expect(await retrying.result()).toBe("cancelled");
  expect(attemptsOf(retrying.workflowId)).toHaveLength(1);
  expect(await relayStatus(retrying)).toBe("cancelled");
});

test("a deliverRequest cancelled before its first task never tries its targets", async () => {
  const never = target("never");
  const input = delivery([never]);
  // Its first task waits (Temporal's start delay), so the cancel is there when it runs.
  const handle = await env.client.workflow.start<typeof deliverRequest>("deliverRequest", {
    taskQueue,
    workflowId: input.requestId,
    args: [input],
    startDelay: "2 seconds",
  });
  await handle.cancel();
  expect(await handle.result()).toBe("cancelled");
  expect(attemptsOf(input.requestId)).toEqual([]);
  expect(callsOf("cancelRequest").map((c) => (c.args[0] as RequestRow).requestId)).toContain(
    input.requestId,
  );
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
