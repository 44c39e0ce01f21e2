/** The worker process: runs delivery and rotation workflows and their activities. */
import { fileURLToPath } from "node:url";
import { DefaultLogger, NativeConnection, Runtime, Worker } from "@temporalio/worker";
import { waitingCapsFrom } from "../core/env.ts";
import { opsHandler } from "../core/ops.ts";
import { DAY_MS } from "../core/policy.ts";
import { importSealingKey } from "../core/sealing.ts";
import { TASK_QUEUE } from "../core/temporal.ts";
import { serveOps } from "../platform/ops-http.ts";
import { targetCaller, targetDispatcher } from "../platform/targets.ts";
import { connectTemporal, ensureCircuit, ensureSchedules } from "../platform/temporal.ts";
import { workerClock } from "../store/clock.ts";
import { connect, postgresAnswers } from "../store/db.ts";
import { createActivities } from "./activities.ts";
import { loadWorkerConfig } from "./config.ts";
import { log, observeAttempt, observeCircuit, registry } from "./observability.ts";
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
const connection = await NativeConnection.connect({
  address: config.TEMPORAL_ADDRESS,
  ...(config.TEMPORAL_API_KEY && { apiKey: config.TEMPORAL_API_KEY, tls: true }),
});
const client = await connectTemporal(config);
await ensureSchedules(client);
const targetRules = { allowPrivate: config.RELAY_ALLOW_PRIVATE_TARGETS };
// Keep-alive connections to targets, only to addresses the rules allow (checked as they open).
const dispatcher = targetDispatcher(targetRules, { keepAliveTimeout: 10_000, connections: 64 });
const worker = await Worker.create({
  connection,
  namespace: config.TEMPORAL_NAMESPACE,
  taskQueue: TASK_QUEUE,
  ...workerPolling,
  // On SIGTERM, attempts in flight get this long to finish; past it they are cancelled and
  // reported failed, so another worker retries them at once rather than after their timeout.
  shutdownGraceTime: config.RELAY_WORKER_SHUTDOWN_GRACE_MS,
  // A workflow's next task waits for the worker that ran its last one this long (then any
  // worker takes it): short, so a stopped worker delays its workflows by seconds, not tens.
  stickyQueueScheduleToStartTimeout: "3 seconds",
  workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
  ...tracing.options,
  activities: createActivities({
    sql,
    callTarget: targetCaller(dispatcher),
    now: workerClock(sql, config.RELAY_DEV_CLOCK),
    sealingKey: await importSealingKey(config.RELAY_ENCRYPTION_KEY),
    logRetentionMs: config.RELAY_LOG_RETENTION_DAYS * DAY_MS,
    waitingCaps: waitingCapsFrom(config),
    observeAttempt,
    observeCircuit,
    ensureCircuit: (targetId) => ensureCircuit(client, targetId),
    retryPolicy: {
      initialIntervalMs: config.RELAY_RETRY_INITIAL_MS,
      backoffCoefficient: config.RELAY_RETRY_BACKOFF,
      maximumIntervalMs: config.RELAY_RETRY_MAX_INTERVAL_MS,
      windowMs: config.RELAY_RETRY_WINDOW_MS,
      attemptTimeoutMs: config.RELAY_ATTEMPT_TIMEOUT_MS,
    },
  }),
});
const ops = serveOps(
  opsHandler({
    checks: {
      postgres: () => postgresAnswers(sql),
      temporal: async () => {
        if (worker.getState() !== "RUNNING") throw new Error(`worker ${worker.getState()}`);
      },
    },
    metrics: () => registry.metrics(),
    metricsContentType: registry.contentType,
    metricsToken: config.RELAY_METRICS_TOKEN,
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
log.info({ taskQueue: TASK_QUEUE, opsPort: config.RELAY_WORKER_PORT }, "worker polling");
await worker.run();
ops.close();
await sql.end({ timeout: 5 });
await connection.close();
await client.connection.close();
await tracing.shutdown();
