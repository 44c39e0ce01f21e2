/**
 * The edge's log (one JSON line per event, pino) and metrics (Prometheus text, prom-client).
 * Both libraries run on Node and Deno alike. Labels name a project and endpoint only once the
 * endpoint was found, so callers probing random hosts and paths cannot grow the series.
 */
import pino from "pino";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { TaskQueueHealth } from "../core/task-queue.ts";
import type { Answered } from "./deps.ts";
import type { StreamRecordOutcome } from "./stream-records.ts";

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function edgeTelemetry() {
  // `base` replaces pid and hostname, which Deno would need --allow-sys to read.
  const log = pino({ base: { service: "edge" } });
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({
    name: "relay_edge_requests_total",
    help: "Inbound calls answered, by status, project and endpoint (empty until found)",
    labelNames: ["status", "project", "endpoint"],
    registers,
  });
  const duration = new Histogram({
    name: "relay_edge_request_duration_seconds",
    help: "Time to the answer's headers, by status class",
    labelNames: ["status_class"],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const temporalStart = new Histogram({
    name: "relay_edge_temporal_start_duration_seconds",
    help: "Starting a workflow through Temporal's HTTP API, by workflow type",
    labelNames: ["workflow"],
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const requestsPerStart = new Histogram({
    name: "relay_edge_async_requests_per_workflow",
    help: "Immediate async calls per delivery workflow started: 1 on their own, more in a batch",
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers,
  });
  const keyLookups = new Counter({
    name: "relay_edge_key_lookups_total",
    help: "API key verifications by cache outcome (hit: answered with no control-plane call)",
    labelNames: ["cache"],
    registers,
  });
  const streamRecords = new Counter({
    name: "relay_edge_stream_records_total",
    help: "Finished streams sent to the control plane to be logged, by outcome (logged, retried, lost)",
    labelNames: ["outcome"],
    registers,
  });
  return {
    log,
    registry,
    /** Failures of Relay's own, for the handler and the runtime adapters. */
    logError(fields: Record<string, unknown>, message: string): void {
      log.error(fields, message);
    },
    answered(event: Answered): void {
      const { project, endpoint } = event;
      requests.inc({ status: event.status, project: project ?? "", endpoint: endpoint ?? "" });
      duration.observe({ status_class: `${Math.floor(event.status / 100)}xx` }, event.seconds);
      log.info(
        {
          requestId: event.requestId,
          project,
          endpoint,
          status: event.status,
          ms: event.seconds * 1000,
          ...(event.traceId && { traceId: event.traceId }),
        },
        "answered",
      );
    },
    temporalStarted(workflow: string, seconds: number): void {
      temporalStart.observe({ workflow }, seconds);
    },
    asyncStarted(requests: number): void {
      requestsPerStart.observe(requests);
    },
    streamRecorded(outcome: StreamRecordOutcome): void {
      streamRecords.inc({ outcome });
    },
    keyLookedUp(cached: boolean): void {
      keyLookups.inc({ cache: cached ? "hit" : "miss" });
    },
    /** Gauges of whether a worker takes Relay's tasks, read from `health` at each scrape. */
    watchTaskQueue(health: () => Promise<TaskQueueHealth>): void {
      // One read serves the three gauges; a failed read leaves the last values standing.
      const read = () => health().catch(() => null);
      new Gauge({
        name: "relay_edge_task_queue_pollers",
        help: "Workers that polled Relay's task queue in the last 70 s, by task type",
        labelNames: ["type"],
        registers,
        async collect() {
          const status = await read();
          if (!status) return;
          for (const [type, count] of Object.entries(status.pollers)) this.set({ type }, count);
        },
      });
      new Gauge({
        name: "relay_edge_task_queue_backlog_age_seconds",
        help: "How long the oldest task in Relay's task queue has waited for a worker",
        registers,
        async collect() {
          const status = await read();
          if (status) this.set(status.backlogAgeSeconds);
        },
      });
      new Gauge({
        name: "relay_edge_task_queue_worker_missing",
        help: "1 while no worker takes Relay's tasks (the reason is in /readyz), else 0",
        registers,
        async collect() {
          const status = await read();
          if (status) this.set(status.problem ? 1 : 0);
        },
      });
    },
  };
}
