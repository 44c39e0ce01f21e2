/**
 * What `npm run bench:shapes` (./shapes.ts) measured of each kind, and how it is read: each kind
 * against the plain stretches run just before and after it, printed as docs/benchmarks.md's tables.
 */
import { STACK_PROCESSES, type StackProcess } from "./publish.ts";

export interface KindResult {
  name: string;
  calls: number;
  refused: number;
  deliveries: number;
  owed: number;
  lost: number;
  duplicates: number;
  outOfOrder: number;
  /** The calls' answer times (ms): p50, p99. */
  callMs: [number, number];
  deliveredPerSecond: number;
  drainSeconds: number;
  cpuMs: Record<StackProcess, number>;
  /** Workflows started from first call to drain end: a batch's, a request's own, any other. */
  workflows: WorkflowsStarted;
}

export interface WorkflowsStarted {
  batches: number;
  requests: number;
  other: number;
}

const stackMs = (r: KindResult) =>
  STACK_PROCESSES.reduce((sum, name) => sum + r.cpuMs[name], 0) / Math.max(1, r.deliveries);

export function summary(r: KindResult) {
  return {
    deliveredPerSecond: Number(r.deliveredPerSecond.toFixed(1)),
    cpuMsPerDelivery: Number(stackMs(r).toFixed(2)),
    lost: r.lost,
    duplicates: r.duplicates,
    outOfOrder: r.outOfOrder,
    drainSeconds: Number(r.drainSeconds.toFixed(1)),
    workflows: r.workflows,
  };
}

/** A kind beside the plain stretches either side of it: their mean rate and CPU per delivery. */
interface Reading {
  result: KindResult;
  plainPerSecond: number;
  plainMs: number;
}

/**
 * Each kind read against the plain stretches run just before and just after it; the first
 * plain stretch is read against itself and the one after it.
 */
export function readings(plains: KindResult[], kinds: KindResult[]): Reading[] {
  const mean = (a: KindResult, b: KindResult, of: (r: KindResult) => number) => (of(a) + of(b)) / 2;
  const beside = (result: KindResult, before: KindResult, after: KindResult): Reading => ({
    result,
    plainPerSecond: mean(before, after, (r) => r.deliveredPerSecond),
    plainMs: mean(before, after, stackMs),
  });
  const [first, second = first] = plains as [KindResult, ...KindResult[]];
  return [
    beside(first, first, second),
    ...kinds.map((kind, i) => beside(kind, plains[i] as KindResult, plains[i + 1] as KindResult)),
  ];
}

export function print(report: {
  seconds: number;
  callers: number;
  loadAverage: { before: number[]; after: number[] };
  plains: KindResult[];
  results: KindResult[];
}) {
  const f = (n: number, digits = 1) => n.toFixed(digits);
  const load = (averages: number[]) => averages.map((a) => a.toFixed(2)).join(" ");
  console.log(
    `\nShapes: ${report.callers} callers for ${report.seconds} s per kind, each posting its next call on its answer, each kind in its own project, then the drain; CPU of the whole stack from /proc over first call to drain end (load average ${load(report.loadAverage.before)} before, ${load(report.loadAverage.after)} after)\n`,
  );
  const rates = report.plains.map((r) => r.deliveredPerSecond);
  console.log(
    `Plain before each kind and after the last: ${report.plains.map((r) => `${f(r.deliveredPerSecond)}/s at ${f(stackMs(r), 2)} ms`).join(", ")} (the fastest ${f(Math.max(...rates) / Math.min(...rates), 2)}x the slowest)\n`,
  );
  console.log(
    "| kind of call | calls | refused | deliveries | delivered/s | vs plain either side | CPU ms per delivery | vs plain either side | call p50 / p99 ms | drain s | lost | duplicates | out of order |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  const read = readings(report.plains, report.results);
  for (const { result: r, plainPerSecond, plainMs } of read) {
    console.log(
      `| ${r.name} | ${r.calls} | ${r.refused} | ${r.deliveries} | ${f(r.deliveredPerSecond)} | ${f(r.deliveredPerSecond / plainPerSecond, 2)}x | ${f(stackMs(r), 2)} | ${f(stackMs(r) / plainMs, 2)}x | ${r.callMs.map((ms) => f(ms, 1)).join(" / ")} | ${f(r.drainSeconds)} | ${r.lost} | ${r.duplicates} | ${r.outOfOrder} |`,
    );
  }
  console.log("\nCPU ms per delivery, by process; workflows started per 100 calls\n");
  console.log(`| kind | ${STACK_PROCESSES.join(" | ")} | batches | requests' own | other |`);
  console.log(`|---|${STACK_PROCESSES.map(() => "---|").join("")}---|---|---|`);
  for (const { result: r } of read) {
    const per100 = (n: number) => f((100 * n) / Math.max(1, r.calls));
    const { batches, requests, other } = r.workflows;
    console.log(
      `| ${r.name} | ${STACK_PROCESSES.map((p) => f(r.cpuMs[p] / Math.max(1, r.deliveries), 2)).join(" | ")} | ${per100(batches)} | ${per100(requests)} | ${per100(other)} |`,
    );
  }
}
