/**
 * The control plane's own Temporal worker: activities only, on its task queue, for what only the
 * control plane does (a recovery job's steps, control/api/recovery-steps.ts; a schedule's fires,
 * control/api/schedule-fires.ts). Temporal down at start or later: it connects again every few
 * seconds, as the rest of the control plane works on.
 */
import type { DataConverter } from "@temporalio/common";
import { DefaultLogger, NativeConnection, Runtime, Worker } from "@temporalio/worker";
import { CONTROL_TASK_QUEUE } from "../core/temporal.ts";

const RECONNECT_MS = 5000;

export interface ControlWorkerOptions {
  connection: () => Promise<Parameters<typeof NativeConnection.connect>[0]>;
  namespace: string;
  dataConverter: DataConverter;
  activities: object;
  log: Record<"warn" | "error", (fields: Record<string, unknown>, message: string) => void>;
}

export function startControlWorker(options: ControlWorkerOptions): { stop(): Promise<void> } {
  // The SDK's own warnings and errors go to the control plane's JSON log.
  Runtime.install({
    logger: new DefaultLogger("WARN", ({ level, message, meta }) =>
      options.log[level === "ERROR" ? "error" : "warn"]({ sdk: true, ...meta }, message),
    ),
  });
  let stopping = false;
  let worker: Worker | undefined;
  const running = (async () => {
    while (!stopping) {
      try {
        const connection = await NativeConnection.connect(await options.connection());
        try {
          worker = await Worker.create({
            connection,
            namespace: options.namespace,
            taskQueue: CONTROL_TASK_QUEUE,
            activities: options.activities,
            dataConverter: options.dataConverter,
            shutdownGraceTime: "5 seconds",
            // Schedules' fires take at most FIRE_SLOTS of them (core/schedules.ts).
            maxConcurrentActivityTaskExecutions: 100,
          });
          if (!stopping) await worker.run();
        } finally {
          worker = undefined;
          await connection.close();
        }
      } catch (err) {
        options.log.error(
          { err, taskQueue: CONTROL_TASK_QUEUE },
          "control worker stopped; retrying",
        );
      }
      if (!stopping) await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  })();
  return {
    async stop() {
      stopping = true;
      worker?.shutdown();
      await running;
    },
  };
}
