/**
 * The workflows' unit tests' harness (workflows/*.test.ts): a Temporal dev server (the project's
 * own CLI, started by `TestWorkflowEnvironment.createLocal`) and a worker running today's
 * workflows on mocked activities that follow a per-target script and log every call. Here, not
 * beside the workflows, because it starts the dev server as dev/ does, which workflows/ may not
 * import.
 */

import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { ApplicationFailure, Context } from "@temporalio/activity";
import type { WorkflowHandle } from "@temporalio/client";
import { defineSearchAttributeKey } from "@temporalio/common";
import proto from "@temporalio/proto";
import { TestWorkflowEnvironment } from "@temporalio/testing";
import { DefaultLogger, Runtime, Worker } from "@temporalio/worker";
import { afterAll, beforeAll } from "vitest";
import type { CallbackJob } from "../core/callbacks.ts";
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
import { ProjectSlots } from "../core/project-slots.ts";
import { searchAttributes, searchAttributeType } from "../core/temporal.ts";
import { findTemporalCli } from "../dev/temporal.ts";
import { devServerFlags, temporalDynamicConfig } from "../dev/temporal-config.ts";
import type { Activities } from "../workflows/activities.ts";
import type { RetryPolicy } from "../workflows/activity-deps.ts";
import {
  type BatchAttemptDeps,
  firstAttemptsOfBatch,
  releasedAttemptsOfBatch,
} from "../workflows/batch-attempts.ts";
import type { DeliverInput, RequestRow } from "../workflows/deliveries.ts";
import { TurnHandOffs } from "../workflows/turn-hand-offs.ts";
import type { deliverRequest } from "../workflows/workflows.ts";
import { claimTurns, joinLaneAsEdge, passTurns } from "./workflow-lanes.ts";

export { joinLaneAsEdge, parkedUnder, passTurns } from "./workflow-lanes.ts";

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
export interface Attempt {
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

export const script = new Map<string, Answer[]>();
/** How many more times a target's project has no room for it on the worker (each a 300 ms wait). */
export const busyTimes = new Map<string, number>();
const BUSY = { kind: "busy", waitMs: 300 } as const;

/** Whether the worker turns this delivery away now (busyTimes), counting it down. */
function turnedAway({ target }: DeliverInput): boolean {
  const left = busyTimes.get(target.id) ?? 0;
  if (left > 0) busyTimes.set(target.id, left - 1);
  return left > 0;
}
const attempts: Attempt[] = [];
const calls: { name: keyof Activities; args: unknown[] }[] = [];

export const attemptsOf = (requestId: string) => attempts.filter((a) => a.requestId === requestId);
export const callsOf = (name: keyof Activities) => calls.filter((c) => c.name === name);

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
export const activities: Activities = {
  async retryPolicy() {
    calls.push({ name: "retryPolicy", args: [] });
    return policy;
  },
  async openRequest(request: RequestRow, status?: "scheduled" | "delivering") {
    calls.push({ name: "openRequest", args: status ? [request, status] : [request] });
  },
  async openScheduled(requests: DeliveryInput[]) {
    calls.push({ name: "openScheduled", args: [requests.map((r) => r.requestId)] });
  },
  async cancelRequest(request: RequestRow) {
    calls.push({ name: "cancelRequest", args: [request] });
    return "cancelled";
  },
  // Targets never wait here: test/circuits.test.ts runs circuits on the real stack.
  holdDelivery: async () => null,
  async circuitState() {
    return {
      hold: null,
      openedAtMs: null,
      breaker: defaultCircuitBreaker,
      waiting: 0,
      flow: null,
      exists: false,
      target: null,
    };
  },
  releaseHeld: async () => [],
  // No target is limited here, so no batch holds a delivery: test/flow-control.test.ts does.
  async holdInBatch() {},
  releasedAttemptsOfBatch(project, workflowId, released) {
    calls.push({ name: "releasedAttemptsOfBatch", args: [released] });
    const deps = { ...batchDeps(), holdAgain: async () => {} };
    return releasedAttemptsOfBatch(deps, project, workflowId, released);
  },
  async forgetHeldInBatch() {},
  async releaseCarried() {},
  // Lanes as store/lanes.ts keeps them, in memory (./workflow-lanes.ts).
  async enterLane({ laneId, requestId }, targetIds, join) {
    if (join) joinLaneAsEdge(laneId, requestId, targetIds);
    const [turns = {}] = claimTurns([{ laneId, requestId, targetIds }]);
    return turns;
  },
  async leaveLane(laneId, requestId, targetIds) {
    calls.push({ name: "leaveLane", args: [laneId, requestId, targetIds] });
    await passTurns(env.client, [{ laneId, requestId, targetIds }]);
  },
  async laneWait() {},
  // Lanes' workflows of releases before (./lanes-before.ts): their histories replay only.
  async joinOrderingLane() {},
  async runningWorkflows() {
    return [];
  },
  async recordProbeFailed() {},
  async disableTarget() {
    return false;
  },
  // Every project here but `quiet` set a notification URL.
  async projectNotifies(project: string) {
    return project !== "quiet";
  },
  async notify(event: NotificationEvent) {
    calls.push({ name: "notify", args: [event] });
    return "none" as const;
  },
  async settleRequest(requestId: string) {
    calls.push({ name: "settleRequest", args: [requestId] });
    return settled(requestId);
  },
  async firstAttempt(request: RequestRow, delivery: DeliverInput, only: boolean, mayHaveRun) {
    calls.push({ name: "firstAttempt", args: [request, delivery, only] });
    const before = mayHaveRun
      ? (await batchDeps().triedBefore([delivery.requestId]))(delivery)
      : undefined;
    if (before) return before;
    if (turnedAway(delivery)) return BUSY;
    const verdict = attempt(delivery, "firstAttempt");
    // Project "lost-first": the attempt reaches its target, then the local activity fails.
    if (delivery.project === "lost-first") throw new Error("the local activity's answer was lost");
    const ends = only && verdict.kind !== "retry";
    return { ...verdict, ...(ends && { settled: settled(delivery.requestId) }) };
  },
  async firstAttemptsOfBatch(project: string, requests: DeliveryInput[]) {
    calls.push({ name: "firstAttemptsOfBatch", args: [requests.map((r) => r.requestId)] });
    const batch = Context.current().info.workflowExecution?.workflowId ?? "batch";
    const firsts = await firstAttemptsOfBatch(batchDeps(), project, batch, requests);
    // Project "lost-batch": its batch's activity delivers, then its answer is lost.
    if (project === "lost-batch") throw new Error("the activity's answer was lost");
    return firsts;
  },
  async deliver(input: DeliverInput) {
    calls.push({ name: "deliver", args: [input] });
    const before = input.mayHaveLanded
      ? (await batchDeps().triedBefore([input.requestId]))(input)
      : undefined;
    if (before?.kind === "delivered") return before.status;
    if (turnedAway(input)) return BUSY;
    const verdict = attempt(input, "deliver");
    if (verdict.kind === "delivered") return verdict.status;
    if (verdict.kind === "skipped") return "skipped";
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
  // No listener waits in this worker: test/sync-batches.test.ts runs batches on the real stack.
  async relaySyncCallsHere(batch: SyncInput[]) {
    calls.push({ name: "relaySyncCallsHere", args: [batch.length] });
    return batch.map(() => "not waited for here" as const);
  },
  async recordStreamCall(record: StreamRecord) {
    calls.push({ name: "recordStreamCall", args: [record] });
  },
  async callBack(job: CallbackJob) {
    calls.push({ name: "callBack", args: [job] });
    return "sent" as const;
  },
  async rotateExpiringKeys() {
    calls.push({ name: "rotateExpiringKeys", args: [] });
    return 3;
  },
  async pruneExpiredRequests() {
    calls.push({ name: "pruneExpiredRequests", args: [] });
    const none = { content: 0, idempotencyKeys: 0, laneEntries: 0, recoveries: 0 };
    return { requests: 5, bodies: 2, holds: 1, scheduled: 0, deletedProjects: 0, ...none };
  },
};

/** A batch's attempts as the worker makes them (workflows/batch-attempts.ts), on the mocks. */
function batchDeps(): BatchAttemptDeps {
  return {
    attempt: (request, delivery, only) => activities.firstAttempt(request, delivery, only),
    settle: async (settling) =>
      new Map(settling.map(({ requestId }) => [requestId, settled(requestId)] as const)),
    triedBefore: async (requestIds) => {
      const delivered = new Map(
        requestIds.flatMap((id) =>
          attemptsOf(id)
            .filter((a) => a.status !== null && classifyStatus(a.status) === "delivered")
            .map((a) => [`${id} ${a.targetId}`, a.status ?? 200] as const),
        ),
      );
      return ({ requestId, target }) => {
        const status = delivered.get(`${requestId} ${target.id}`);
        return status === undefined ? undefined : { kind: "delivered", status };
      };
    },
    slots: new ProjectSlots({ slots: 100, perProject: 100 }),
    lanes: {
      claim: async (claims, carrier) => claimTurns(claims, carrier),
      // Turns are signalled here (./workflow-lanes.ts): none is handed over in process.
      listen: (carrier, claims) => new TurnHandOffs().listen(carrier, claims),
      listenLonger: () => null,
      leave: (leaving, keep) => passTurns(env.client, leaving, keep),
      countWaits: async () => {},
    },
  };
}

export const taskQueue = "workflow-tests";
export let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;

/** Starts the dev server and the worker before a file's tests, and stops them after. */
export function withMockedWorker(): void {
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
      workflowsPath: fileURLToPath(new URL("../workflows/workflows.ts", import.meta.url)),
      activities,
    });
    running = worker.run();
  }, 120_000);

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
  });
}

let ids = 0;
export const nextId = (what: string) => `${what}-${Date.now()}-${++ids}`;

export function target(name: string, deliveryMode: DeliveryTarget["deliveryMode"] = "async") {
  return {
    id: nextId(name),
    name,
    targetUrl: `http://${name}.example/hook`,
    deliveryMode,
    timeoutSeconds: 5,
    headers: {},
  };
}

export function delivery(targets: DeliveryTarget[]): DeliveryInput {
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

export function start(input: DeliveryInput, workflowId = input.requestId) {
  return env.client.workflow.start<typeof deliverRequest>("deliverRequest", {
    taskQueue,
    workflowId,
    args: [input],
  });
}

const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");

/** The RelayStatus search attribute the workflow set last, if any. */
export async function relayStatus(handle: WorkflowHandle) {
  return (await handle.describe()).typedSearchAttributes.get(statusKey);
}

/** The durations of the workflow's timers, in ms. */
export async function timers(handle: WorkflowHandle) {
  const { events } = await handle.fetchHistory();
  return (events ?? []).flatMap((e) => {
    const wait = e.timerStartedEventAttributes?.startToFireTimeout;
    return wait ? [Number(wait.seconds ?? 0) * 1000 + (wait.nanos ?? 0) / 1e6] : [];
  });
}

/** With RECORD_HISTORIES=1, keeps the run's history for replay.test.ts. */
export async function recordHistory(handle: WorkflowHandle, name: string) {
  if (!process.env.RECORD_HISTORIES) return;
  const history = proto.temporal.api.history.v1.History.encode(await handle.fetchHistory());
  await writeFile(new URL(`../workflows/histories/${name}.bin`, import.meta.url), history.finish());
}
