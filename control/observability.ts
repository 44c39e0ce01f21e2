/**
 * The control plane's log (one JSON line per event, pino) and metrics (Prometheus text,
 * prom-client), one of each per process. Calls are labelled by route pattern or RPC, never by
 * raw path, so the series stay bounded.
 */
import { Counter, Histogram } from "prom-client";
import { processTelemetry } from "../platform/ops-http.ts";

export const { log, registry } = processTelemetry("control");

const calls = new Counter({
  name: "relay_control_calls_total",
  help: "Management and edge calls answered, by protocol (rest, rpc), route or RPC, and status",
  labelNames: ["protocol", "route", "status"],
  registers: [registry],
});
const duration = new Histogram({
  name: "relay_control_call_duration_seconds",
  help: "Time to answer a call, by protocol",
  labelNames: ["protocol"],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30],
  registers: [registry],
});

/** A finished call; a server stream (the edges' change feed) counts when it ends. */
export function observeCall(
  protocol: "rest" | "rpc",
  route: string,
  status: string | number,
  seconds: number,
): void {
  calls.inc({ protocol, route, status });
  duration.observe({ protocol }, seconds);
}
