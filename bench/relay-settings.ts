/**
 * What BENCH_* says for bench/relay.ts: the run and its report (bench/relay-report.ts) both size
 * their sections and headings by it.
 */
import { quick } from "./harness.ts";

export const seconds = Number(process.env.BENCH_SECONDS ?? (quick ? 1 : 8));
export const streamRuns = Number(process.env.BENCH_STREAM_RUNS ?? (quick ? 5 : 30));
/** Unmeasured streams per path first: the edge's first calls run cold code. */
export const streamWarmUp = quick ? 2 : 10;
export const deliverySeconds = Number(process.env.BENCH_DELIVERY_SECONDS ?? (quick ? 3 : 60));
/** Starters and callers for the sustained-delivery section, as many as the ceiling probe's. */
export const deliveryConcurrency = 32;
/** BENCH_ONLY=sync, =stream, =delivery, =burst, =charges or =publish runs that section alone. */
export const only = process.env.BENCH_ONLY;
/** Connections for throughput, sustained load and concurrent starts. */
export const connections = quick ? 4 : 16;
