/** The worker process: runs delivery and rotation workflows and their activities. */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkerOptions,
} from "@temporalio/worker";
import { waitingCapsFrom } from "../core/env.ts";
import { ownListeners } from "../core/listeners.ts";
import { opsHandler } from "../core/ops.ts";
import { sealedOnly } from "../core/payload-codec.ts";
import { DAY_MS } from "../core/policy.ts";
import { ProjectSlots } from "../core/project-slots.ts";
import { importSealingKey } from "../core/sealing.ts";
import {
  JOB_TASK_QUEUE,
  NOTIFICATION_TASK_QUEUE,
  SYNC_TASK_QUEUE,
  TASK_QUEUE,
} from "../core/temporal.ts";
import { serveOps } from "../platform/ops-http.ts";
import { machineAddresses, targetCaller, targetDispatcher } from "../platform/targets.ts";
import {
  connectTemporal,
  deleteProjectHistories,
  ensureCircuit,
  ensureSchedules,
  joinOrderingLane,
  payloadCipherOf,
  relayDataConverter,
  runningWorkflows,
  signalTurns,
  temporalAnswers,
  temporalConnectionOptions,
  wakeCircuit,
} from "../platform/temporal.ts";
import { nodeTransformPool } from "../platform/transforms.ts";
import { workerClock } from "../store/clock.ts";
import { connect, postgresAnswers } from "../store/db.ts";
import { keepSeeing } from "../store/workers.ts";
import { createActivities } from "./activities.ts";
import { workflowBundleFor } from "./bundle.ts";
import { loadWorkerConfig } from "./config.ts";
import {
  log,
  observeAttempt,
  observeCircuit,
  observeHandedOver,
  observeSlots,
  registry,
} from "./observability.ts";
import { SyncAnswers } from "./sync-answers.ts";
import { closedOf, eagerSyncStarter, syncCallsRoute } from "./sync-calls.ts";
import { workerTracing } from "./tracing.ts";
import { workerPolling } from "./tuning.ts";

const config = loadWorkerConfig(process.env);
const tracing = workerTracing(config);
// The SDK's own warnings and errors go to the same JSON log.
Runtime.install({
  logger: new DefaultLogger("WARN", ({ level, message, meta }) =>
    log[level === "ERROR" ? "error" : "warn"]({ sdk: true, ...meta }, message),
  ),
});
const sql = connect(config.DATABASE_URL);
const connection = await NativeConnection.connect(await temporalConnectionOptions(config));
const client = await connectTemporal(config);
await ensureSchedules(client);
const targetRules = {
  allowPrivate: config.RELAY_ALLOW_PRIVATE_TARGETS,
  ownListeners: ownListeners(config.RELAY_EDGE_LISTENERS, machineAddresses()),
};
// Keep-alive connections to targets, only to addresses the rules allow (checked as they open).
const dispatcher = targetDispatcher(targetRules, { keepAliveTimeout: 10_000, connections: 64 });
const syncAnswers = new SyncAnswers();
const payloadCipher = await payloadCipherOf(config);
// Named on its attempts, and seen alive every few seconds (store/workers.ts).
const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
const liveness = keepSeeing(sql, workerId, (fields, message) => log.error(fields, message));
const activities = createActivities({
  sql,
  workerId,
  syncAnswers,
  callTarget: targetCaller(dispatcher),
  transform: nodeTransformPool().run,
  now: workerClock(sql, config.RELAY_DEV_CLOCK),
  sealingKey: await importSealingKey(config.RELAY_ENCRYPTION_KEY),
  logRetentionMs: config.RELAY_LOG_RETENTION_DAYS * DAY_MS,
  deleteHistories: (slug) => deleteProjectHistories(client, slug, `swept-${Date.now()}`),
  waitingCaps: waitingCapsFrom(config),
  observeAttempt,
  observeCircuit,
  ensureCircuit: (targetId) => ensureCircuit(client, targetId),
  ensureDrain: (targetId) => wakeCircuit(client, targetId),
  lanes: {
    tellTurns: (given) => signalTurns(client, given),
    join: (laneId, project, join) => joinOrderingLane(client, laneId, project, join),
    running: (workflowIds) => runningWorkflows(client, workflowIds),
  },
  retryPolicy: {
    initialIntervalMs: config.RELAY_RETRY_INITIAL_MS,
    backoffCoefficient: config.RELAY_RETRY_BACKOFF,
    maximumIntervalMs: config.RELAY_RETRY_MAX_INTERVAL_MS,
    windowMs: config.RELAY_RETRY_WINDOW_MS,
    attemptTimeoutMs: config.RELAY_ATTEMPT_TIMEOUT_MS,
  },
  slots: {
    attempts: new ProjectSlots(
      {
        slots: config.RELAY_WORKER_ATTEMPT_SLOTS,
        perProject: config.RELAY_PROJECT_ATTEMPTS_IN_FLIGHT,
      },
      observeSlots("attempts"),
    ),
    sync: new ProjectSlots(
      { slots: config.RELAY_WORKER_SYNC_SLOTS, perProject: config.RELAY_PROJECT_SYNC_IN_FLIGHT },
      observeSlots("sync"),
    ),
    notifications: new ProjectSlots(
      {
        slots: config.RELAY_WORKER_NOTIFICATION_SLOTS,
        perProject: config.RELAY_PROJECT_NOTIFICATIONS_IN_FLIGHT,
      },
      observeSlots("notifications"),
    ),
    // Each holds a local activity slot while it listens: at most half of them listen at once.
    turnListeners: new ProjectSlots(
      {
        slots: Math.max(1, Math.floor(config.RELAY_WORKER_ATTEMPT_SLOTS / 2)),
        perProject: config.RELAY_PROJECT_ATTEMPTS_IN_FLIGHT,
      },
      observeSlots("turn listeners"),
    ),
  },
});
// One bundle of the workflows for the three workers below: the build's, or made now from source.
const workflowBundle = await workflowBundleFor(tracing.traced);
const shared = {
  connection,
  namespace: config.TEMPORAL_NAMESPACE,
  // Every payload leaves sealed (core/payload-codec.ts), and only sealed ones are taken in:
  // histories from before the codec open only when told (RELAY_UNSEALED_PAYLOADS=accept).
  dataConverter: relayDataConverter(
    config.RELAY_UNSEALED_PAYLOADS === "accept" ? payloadCipher : sealedOnly(payloadCipher),
  ),
  workflowBundle,
  activities,
  ...(tracing.options.interceptors && { interceptors: tracing.options.interceptors }),
  ...(tracing.options.sinks && { sinks: tracing.options.sinks }),
  ...workerPolling,
  // On SIGTERM, attempts in flight get this long to finish; past it they are cancelled and
  // reported failed, so another worker retries them at once rather than after their timeout.
  shutdownGraceTime: config.RELAY_WORKER_SHUTDOWN_GRACE_MS,
  // A workflow's next task waits for the worker that ran its last one this long (then any
  // worker takes it): short, so a stopped worker delays its workflows by seconds, not tens.
  stickyQueueScheduleToStartTimeout: "3 seconds",
} satisfies Partial<WorkerOptions>;
/**
 * Four task queues, each with slots of its own, so no kind of work waits for another's: async
 * deliveries (and circuits, schedules), sync calls, notifications (and callbacks), background
 * jobs (a recovery job's workflow, whose steps run on the control plane). A first attempt or a sync
 * call runs as a local activity inside its workflow task, so each holds one workflow-task slot
 * as well while it runs.
 */
const workers = await Promise.all([
  Worker.create({
    ...shared,
    taskQueue: TASK_QUEUE,
    maxConcurrentWorkflowTaskExecutions: config.RELAY_WORKER_ATTEMPT_SLOTS,
    maxConcurrentLocalActivityExecutions: config.RELAY_WORKER_ATTEMPT_SLOTS,
    maxConcurrentActivityTaskExecutions: config.RELAY_WORKER_ATTEMPT_SLOTS,
  }),
  Worker.create({
    ...shared,
    taskQueue: SYNC_TASK_QUEUE,
    maxConcurrentWorkflowTaskExecutions: config.RELAY_WORKER_SYNC_SLOTS,
    maxConcurrentLocalActivityExecutions: config.RELAY_WORKER_SYNC_SLOTS,
  }),
  Worker.create({
    ...shared,
    taskQueue: NOTIFICATION_TASK_QUEUE,
    maxConcurrentWorkflowTaskExecutions: config.RELAY_WORKER_NOTIFICATION_SLOTS,
    maxConcurrentActivityTaskExecutions: config.RELAY_WORKER_NOTIFICATION_SLOTS,
  }),
  // A job's workflow task only paces its steps: a few slots do.
  Worker.create({ ...shared, taskQueue: JOB_TASK_QUEUE, maxConcurrentWorkflowTaskExecutions: 8 }),
]);
const ops = serveOps(
  opsHandler({
    checks: {
      postgres: () => postgresAnswers(sql),
      temporal: async () => {
        const stopped = workers.find((worker) => worker.getState() !== "RUNNING");
        if (stopped) throw new Error(`worker ${stopped.getState()}`);
        // A running worker keeps polling a server that is gone: ask the server itself.
        await temporalAnswers(client);
      },
    },
    metrics: () => registry.metrics(),
    metricsContentType: registry.contentType,
    metricsToken: config.RELAY_METRICS_TOKEN,
  }),
  config.RELAY_EDGE_TOKEN === undefined
    ? undefined
    : syncCallsRoute({
        edgeToken: config.RELAY_EDGE_TOKEN,
        slots: new ProjectSlots(
          {
            slots: config.RELAY_WORKER_SYNC_SLOTS,
            perProject: config.RELAY_PROJECT_SYNC_IN_FLIGHT,
          },
          observeSlots("sync handed over"),
        ),
        lingerMs: config.RELAY_SYNC_LINGER_MS,
        answers: syncAnswers,
        start: eagerSyncStarter(connection, config.TEMPORAL_NAMESPACE, payloadCipher),
        closed: closedOf(client),
        observeStart: observeHandedOver,
        logError: (fields, message) => log.error(fields, message),
      }),
)
  .once("error", (err) => {
    log.fatal(
      { err, port: config.RELAY_WORKER_PORT },
      "ops listener failed; set RELAY_WORKER_PORT",
    );
    process.exit(1);
  })
  .listen(config.RELAY_WORKER_PORT, config.RELAY_WORKER_HOST);
log.info(
  {
    taskQueues: [TASK_QUEUE, SYNC_TASK_QUEUE, NOTIFICATION_TASK_QUEUE, JOB_TASK_QUEUE],
    opsPort: config.RELAY_WORKER_PORT,
  },
  "worker polling",
);
await Promise.all(workers.map((worker) => worker.run()));
liveness.stop();
ops.close();
await sql.end({ timeout: 5 });
await connection.close();
await client.connection.close();
await tracing.shutdown();
