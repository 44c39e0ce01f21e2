/**
 * bench/relay.ts's tables: each section's figures as markdown, beside its baselines and ratios.
 */
import { type BurstResult, printBurst } from "./burst.ts";
import type { DeliveryResult } from "./delivery.ts";
import { connections, deliveryConcurrency, deliverySeconds, streamRuns } from "./relay-settings.ts";
import type { WrkResult } from "./wrk.ts";

export function printReport(r: {
  sync: SyncResults;
  stream: Record<string, { ttfbP50: number; ttfbP99: number; chunkP50: number; chunkP99: number }>;
  async: {
    edgeAsync: WrkResult;
    rawStarts: { startsPerSecond: number; p50Ms: number; p99Ms: number };
  };
  scrape: {
    unscrapedBefore: WrkResult;
    scraped: { intervalMs: number; load: WrkResult; scrapes: number }[];
    unscrapedAfter: WrkResult;
  };
  delivery: SustainedDelivery;
  burst: BurstResult;
}) {
  const f = (n: number) => n.toFixed(2);
  printSync(r.sync);
  printStream(r.stream);
  const { edgeAsync, rawStarts } = r.async;
  console.log(`\n(b) async, ${connections} connections / ${connections} concurrent starts\n`);
  console.log("| path | per second | p50 ms | p99 ms |");
  console.log("|---|---|---|---|");
  console.log(
    `| raw @temporalio/client start | ${Math.round(rawStarts.startsPerSecond)} | ${f(rawStarts.p50Ms)} | ${f(rawStarts.p99Ms)} |`,
  );
  console.log(
    `| edge 202 | ${Math.round(edgeAsync.requestsPerSecond)} | ${f(edgeAsync.p50Ms)} | ${f(edgeAsync.p99Ms)} |`,
  );
  console.log(
    `| ratio | ${f(edgeAsync.requestsPerSecond / rawStarts.startsPerSecond)}x | | ${f(edgeAsync.p99Ms / rawStarts.p99Ms)}x p99 |`,
  );
  const { unscrapedBefore: a1, scraped, unscrapedAfter: a2 } = r.scrape;
  const baseline = {
    requestsPerSecond: (a1.requestsPerSecond + a2.requestsPerSecond) / 2,
    p99Ms: (a1.p99Ms + a2.p99Ms) / 2,
  };
  console.log(`\n(c) async hot path, ${connections} connections, while /metrics is scraped\n`);
  console.log(
    "| run | scrapes | req/s | p50 ms | p99 ms | req/s vs no scrapes | p99 vs no scrapes |",
  );
  console.log("|---|---|---|---|---|---|---|");
  const row = (name: string, run: WrkResult, scrapes: number) =>
    console.log(
      `| ${name} | ${scrapes} | ${Math.round(run.requestsPerSecond)} | ${f(run.p50Ms)} | ${f(run.p99Ms)} | ${f(run.requestsPerSecond / baseline.requestsPerSecond)}x | ${f(run.p99Ms / baseline.p99Ms)}x |`,
    );
  row("no scrapes (before)", a1, 0);
  for (const { intervalMs, load, scrapes } of scraped) row(`every ${intervalMs} ms`, load, scrapes);
  row("no scrapes (after)", a2, 0);
  printDelivery(r.delivery);
  printBurst(r.burst);
}

export interface SyncResults {
  paths: Record<string, { latency: WrkResult; throughput: WrkResult }>;
  /** Bare one-local-activity workflows completed per second by as many starters. */
  ceilingPerSecond: number;
  /** One such workflow at a time, start to result (issue 27: sync may add at most 5 ms more). */
  bareOneAtATimeP50Ms: number;
}

export function printSync({ paths, ceilingPerSecond, bareOneAtATimeP50Ms }: SyncResults) {
  const f = (n: number) => n.toFixed(2);
  const base = paths.direct?.latency as WrkResult;
  console.log(`\n(a) sync, 1 connection for latency, ${connections} for throughput (wrk)\n`);
  console.log(
    `| path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s (c${connections}) | errors |`,
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const [name, { latency, throughput }] of Object.entries(paths)) {
    console.log(
      `| ${name} | ${f(latency.p50Ms)} | ${f(latency.p99Ms)} | ${f(latency.p50Ms - base.p50Ms)} | ${f(latency.p99Ms - base.p99Ms)} | ${Math.round(throughput.requestsPerSecond)} | ${latency.errors + throughput.errors} |`,
    );
  }
  const edge = paths["edge (sync via Temporal)"]?.throughput.requestsPerSecond ?? 0;
  console.log(
    `| bare one-local-activity workflows, ${connections} starters (ceiling) | | | | | ${Math.round(ceilingPerSecond)} | |`,
  );
  console.log(`| ratio (edge / ceiling) | | | | | ${f(edge / ceilingPerSecond)}x | |`);
  const edgeAdded = (paths["edge (sync via Temporal)"]?.latency.p50Ms ?? 0) - base.p50Ms;
  console.log(
    `| bare one-local-activity workflow, one at a time, start to result | ${f(bareOneAtATimeP50Ms)} | | | | | |`,
  );
  console.log(
    `| edge's added p50 less the bare workflow's (issue 27: at most 5 ms) | | | ${f(edgeAdded - bareOneAtATimeP50Ms)} | | | |`,
  );
}

export interface SustainedDelivery {
  delivered: DeliveryResult;
  ceilingPerSecond: number;
  ceilingRuns: number[];
}

export function printDelivery({ delivered, ceilingPerSecond, ceilingRuns }: SustainedDelivery) {
  const f = (n: number) => n.toFixed(1);
  console.log(
    `\n(e) sustained delivery, ${deliveryConcurrency} callers each waiting for its delivery, ${deliverySeconds} s; bare ceiling with ${deliveryConcurrency} starters on the same Temporal server, before and after\n`,
  );
  console.log(
    "| path | per second | 202 p50 ms | receipt p50 ms | receipt p99 ms | refused | lost |",
  );
  console.log("|---|---|---|---|---|---|---|");
  console.log(
    `| bare workflows, no activity (ceiling) | ${f(ceilingPerSecond)} (${ceilingRuns.map(f).join(" / ")}) | | | | | |`,
  );
  console.log(
    `| relay: 202 to the target's receipt | ${f(delivered.deliveredPerSecond)} | ${f(delivered.acceptedP50Ms)} | ${f(delivered.deliveredP50Ms)} | ${f(delivered.deliveredP99Ms)} | ${delivered.refused} | ${delivered.lost} |`,
  );
  console.log(
    `| ratio (relay / ceiling) | ${(delivered.deliveredPerSecond / ceilingPerSecond).toFixed(2)}x | | | | | |`,
  );
}

export function printStream(
  stream: Record<string, { ttfbP50: number; ttfbP99: number; chunkP50: number; chunkP99: number }>,
) {
  const f = (n: number) => n.toFixed(2);
  const direct = stream.direct as { ttfbP50: number; chunkP50: number };
  const nginxAdded = {
    ttfb: (stream.nginx?.ttfbP50 ?? 0) - direct.ttfbP50,
    chunk: (stream.nginx?.chunkP50 ?? 0) - direct.chunkP50,
  };
  // Issue 27's yardstick: the edge's added time to first byte within 1.5 ms, where a bare Node
  // proxy's is about 1.
  const proxyAddedTtfb = (stream["bare Node proxy"]?.ttfbP50 ?? 0) - direct.ttfbP50;
  console.log(
    `\n(a) stream, ${streamRuns} streams of 10 chunks each per path, the paths in turn\n`,
  );
  console.log(
    "| path | TTFB p50 ms | TTFB p99 ms | chunk lag p50 ms | chunk lag p99 ms | added TTFB p50 | added chunk p50 | vs nginx's added (TTFB / chunk) | added TTFB over the bare Node proxy's |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const [name, s] of Object.entries(stream)) {
    const addedTtfb = s.ttfbP50 - direct.ttfbP50;
    const addedChunk = s.chunkP50 - direct.chunkP50;
    console.log(
      `| ${name} | ${f(s.ttfbP50)} | ${f(s.ttfbP99)} | ${f(s.chunkP50)} | ${f(s.chunkP99)} | ${f(addedTtfb)} | ${f(addedChunk)} | ${f(addedTtfb / nginxAdded.ttfb)}x / ${f(addedChunk / nginxAdded.chunk)}x | ${f(addedTtfb - proxyAddedTtfb)} |`,
    );
  }
}
