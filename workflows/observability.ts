/**
 * The worker's log (one JSON line per event, pino) and metrics (Prometheus text, prom-client):
 * every delivery attempt, by outcome, with its latency.
 */
import { Counter, Gauge, Histogram } from "prom-client";
import { classifyStatus } from "../core/delivery.ts";
import type { SlotObserver } from "../core/project-slots.ts";
import { processTelemetry } from "../platform/ops-http.ts";

export const { log, registry } = processTelemetry("worker");

const attempts = new Counter({
  name: "relay_worker_delivery_attempts_total",
  help: "Delivery attempts by outcome: delivered, retry (the answer is worth another try), failed (it is not), unreachable (no answer)",
  labelNames: ["outcome", "mode"],
  registers: [registry],
});
const latency = new Histogram({
  name: "relay_worker_delivery_attempt_duration_seconds",
  help: "A delivery attempt, from the call to the target's answer",
  labelNames: ["mode"],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90],
  registers: [registry],
});

export interface AttemptOutcome {
  requestId: string;
  target: string;
  mode: string;
  attempt: number;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
}

/** Logs and counts one finished attempt. */
export function observeAttempt(a: AttemptOutcome): void {
  const outcome = a.statusCode === null ? "unreachable" : classifyStatus(a.statusCode);
  attempts.inc({ outcome, mode: a.mode });
  latency.observe({ mode: a.mode }, a.latencyMs / 1000);
  log.info({ ...a, outcome }, "attempt");
}

const circuits = new Counter({
  name: "relay_worker_circuit_transitions_total",
  help: "Target circuits opened (a run of failed attempts), recovered (a success closed one) and disabled (open too long)",
  labelNames: ["transition"],
  registers: [registry],
});

/** Logs and counts a target's circuit moving. */
export function observeCircuit(targetId: string, transition: "opened" | "recovered" | "disabled") {
  circuits.inc({ transition });
  log.warn({ targetId, transition }, "circuit");
}

const inFlight = new Gauge({
  name: "relay_worker_project_in_flight",
  help: "Calls a project has in flight on this worker, by pool (attempts, sync, notifications); a project with none has no series",
  labelNames: ["pool", "project"],
  registers: [registry],
});
const turnedAway = new Counter({
  name: "relay_worker_project_busy_total",
  help: "Calls not made because their project had its share of the pool in flight: an attempt then waits and tries again, a sync call is refused (503)",
  // By pool only: a counter per project would keep a series for every project that was ever busy.
  labelNames: ["pool"],
  registers: [registry],
});

/** The in-flight gauge and the busy counter of one of the worker's pools. */
export function observeSlots(
  pool: "attempts" | "sync" | "notifications" | "sync handed over" | "turn listeners",
): SlotObserver {
  return {
    inFlight: (project, count) => {
      if (count > 0) inFlight.set({ pool, project }, count);
      else inFlight.remove({ pool, project });
    },
    turnedAway: () => turnedAway.inc({ pool }),
  };
}

const handedOver = new Counter({
  name: "relay_worker_sync_calls_handed_over_total",
  help: "Sync calls edges handed this worker, by how Temporal started them: eager (the first task came back here in the start's answer) or matched (through matching, no slot free here)",
  labelNames: ["start"],
  registers: [registry],
});

/** Counts a sync call an edge handed this worker, as its workflow was started (./sync-calls.ts). */
export function observeHandedOver(eager: boolean): void {
  handedOver.inc({ start: eager ? "eager" : "matched" });
}
