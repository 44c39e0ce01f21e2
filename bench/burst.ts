/**
 * Async calls under a burst (issue 13, target 4): the 202's latency at one connection, then
 * BENCH_BURST_REQUESTS POSTs (5,000; 500 with BENCH_QUICK=1) sent open-loop at a fixed rate
 * (500/s; 250/s quick), each sent on its schedule whatever the earlier ones' answers. Every
 * answer's status, Retry-After and latency (from its scheduled send, so a client-side queue would
 * show) is kept; the bench target's receipts (its GET /receipts stream of delivered request ids)
 * are counted until every 202'd request arrived or none arrived for a while. Section (g) of
 * bench/relay.ts (`BENCH_ONLY=burst` runs it alone).
 */
import { Agent, Pool, request } from "undici";
import { followReceipts, percentile, quick } from "./harness.ts";

export interface BurstSetup {
  edgeUrl: string;
  /** The Host naming the project: `{slug}.localhost`. */
  host: string;
  /** `Bearer {key}`. */
  auth: string;
  /** The bench target's base URL (its GET /receipts, bench/target.ts). */
  targetUrl: string;
  /** An async endpoint whose target is the bench target's /sink. */
  path?: string;
}

export interface BurstResult {
  sequential: {
    requests: number;
    p50Ms: number;
    p99Ms: number;
    not202: number;
    /**
     * From the edge's /metrics over the same calls: its handler, and its workflows' starts (made
     * after the 202 once Postgres holds the call, so not within the handler's time).
     */
    edgeMeanMs: number;
    temporalStartMeanMs: number;
  };
  burst: {
    requests: number;
    ratePerSecond: number;
    /** How long sending took: the schedule's length unless the client fell behind it. */
    sendSeconds: number;
    byStatus: Record<string, number>;
    /** 429s and 503s, with and without Retry-After. */
    refusedWithRetryAfter: number;
    refusedWithoutRetryAfter: number;
    /** Calls with no answer within BENCH_BURST_TIMEOUT_MS, or whose connection failed. */
    noAnswer: number;
    accepted: { p50Ms: number; p99Ms: number; maxMs: number };
    refused: { p50Ms: number; p99Ms: number; maxMs: number };
    /**
     * The edge's own mean time to answer 2xx and 5xx over the burst (its /metrics): what the
     * callers saw beyond it waited before the edge's handler (accept queue, a starved loop).
     */
    edgeMeanMs: { accepted: number; refused: number };
    /** 202'd requests the target received at least once, and received more than once. */
    delivered: number;
    duplicates: number;
    /** From the last 202 until the last 202'd request reached the target (or the wait gave up). */
    drainSeconds: number;
  };
}

const BODY = '{"bench":true}';
const sequentialRequests = Number(process.env.BENCH_SEQUENTIAL_REQUESTS ?? (quick ? 100 : 2000));
const burstRequests = Number(process.env.BENCH_BURST_REQUESTS ?? (quick ? 500 : 5000));
const burstRate = Number(process.env.BENCH_BURST_RATE ?? (quick ? 250 : 500));
/** A call unanswered this long counts as no answer. */
const answerTimeoutMs = Number(process.env.BENCH_BURST_TIMEOUT_MS ?? 30_000);
/** The delivery wait gives up after this long without a new receipt. */
const drainIdleMs = Number(process.env.BENCH_DRAIN_IDLE_MS ?? 60_000);

const spread = (values: number[]) => ({
  p50Ms: percentile(values, 0.5),
  p99Ms: percentile(values, 0.99),
  maxMs: values.length > 0 ? Math.max(...values) : Number.NaN,
});

/**
 * Sum and count of each of the edge's histograms, over all their labels (under the name alone)
 * and per series (under the name and labels).
 */
async function histograms(edgeUrl: string): Promise<Map<string, { sum: number; count: number }>> {
  const text = await (await request(`${edgeUrl}/metrics`)).body.text();
  const totals = new Map<string, { sum: number; count: number }>();
  const add = (key: string, part: string, value: number) => {
    const total = totals.get(key) ?? { sum: 0, count: 0 };
    total[part as "sum" | "count"] += value;
    totals.set(key, total);
  };
  for (const [, name = "", part = "", labels = "", value] of text.matchAll(
    /^(\w+)_(sum|count)(\{[^}]*\})? (\S+)$/gm,
  )) {
    add(name, part, Number(value));
    if (labels) add(`${name}${labels}`, part, Number(value));
  }
  return totals;
}

/** The mean of `name` between two readings of `histograms`, in ms. */
function meanMs(
  before: Map<string, { sum: number; count: number }>,
  after: Map<string, { sum: number; count: number }>,
  name: string,
): number {
  const a = after.get(name) ?? { sum: 0, count: 0 };
  const b = before.get(name) ?? { sum: 0, count: 0 };
  return ((a.sum - b.sum) / (a.count - b.count)) * 1000;
}

interface Answer {
  status: number | "none";
  retryAfter: boolean;
  ms: number;
  requestId: string | null;
}

export async function asyncBurst(setup: BurstSetup): Promise<BurstResult> {
  const url = `${setup.edgeUrl}${setup.path ?? "/v1/async"}`;
  const headers = {
    host: setup.host,
    authorization: setup.auth,
    "content-type": "application/json",
  };
  const post = async (dispatcher: Agent | Pool, scheduled: number): Promise<Answer> => {
    try {
      const response = await request(url, {
        method: "POST",
        headers,
        body: BODY,
        dispatcher,
        headersTimeout: answerTimeoutMs,
        bodyTimeout: answerTimeoutMs,
      });
      await response.body.text();
      const requestId = response.headers["x-relay-request-id"];
      return {
        status: response.statusCode,
        retryAfter: response.headers["retry-after"] !== undefined,
        ms: performance.now() - scheduled,
        requestId: typeof requestId === "string" ? requestId : null,
      };
    } catch {
      return {
        status: "none",
        retryAfter: false,
        ms: performance.now() - scheduled,
        requestId: null,
      };
    }
  };

  // Every delivery's request id, from before the first call on.
  const receipts = new Map<string, number>();
  let lastReceipt = performance.now();
  const following = await followReceipts(setup.targetUrl, (id) => {
    receipts.set(id, (receipts.get(id) ?? 0) + 1);
    lastReceipt = performance.now();
  });

  // One connection, one call at a time.
  const one = new Pool(setup.edgeUrl, { connections: 1 });
  for (let i = 0; i < 20; i++) await post(one, performance.now()); // warm-up
  const sequential: Answer[] = [];
  const before = await histograms(setup.edgeUrl);
  for (let i = 0; i < sequentialRequests; i++) sequential.push(await post(one, performance.now()));
  const after = await histograms(setup.edgeUrl);
  await one.close();
  console.error(`burst: ${sequentialRequests} sequential calls answered; the burst starts`);

  // Open loop: enough connections that no call waits for one (rate x the longest answer).
  const many = new Agent({ connections: 4096, pipelining: 1 });
  const intervalMs = 1000 / burstRate;
  const calls: Promise<Answer>[] = [];
  const beforeBurst = await histograms(setup.edgeUrl);
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(burstRequests, Math.floor((performance.now() - start) / intervalMs) + 1);
      while (calls.length < due) calls.push(post(many, start + calls.length * intervalMs));
      if (calls.length < burstRequests) {
        setTimeout(tick, Math.max(0, start + calls.length * intervalMs - performance.now()));
      } else resolve();
    };
    tick();
  });
  const sendSeconds = (performance.now() - start) / 1000;
  const answers = await Promise.all(calls);
  const lastAnswered = performance.now();
  const afterBurst = await histograms(setup.edgeUrl);
  const handled = (statusClass: string) =>
    meanMs(
      beforeBurst,
      afterBurst,
      `relay_edge_request_duration_seconds{status_class="${statusClass}"}`,
    );
  await many.close();
  console.error(`burst: every call answered or given up on; waiting for deliveries`);

  const accepted = answers.filter((a) => a.status === 202);
  const acceptedIds = accepted.flatMap((a) => a.requestId ?? []);
  const refused = answers.filter((a) => a.status === 429 || a.status === 503);
  const byStatus: Record<string, number> = {};
  for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;

  // Deliveries: until all arrived, or none arrived for `drainIdleMs`.
  const arrived = () => acceptedIds.filter((id) => receipts.has(id)).length;
  while (
    arrived() < acceptedIds.length &&
    performance.now() - Math.max(lastReceipt, lastAnswered) < drainIdleMs
  ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const lastDelivery = lastReceipt;
  await following.stop();
  const delivered = arrived();
  const duplicates = acceptedIds.filter((id) => (receipts.get(id) ?? 0) > 1).length;

  return {
    sequential: {
      requests: sequential.length,
      p50Ms: percentile(
        sequential.map((a) => a.ms),
        0.5,
      ),
      p99Ms: percentile(
        sequential.map((a) => a.ms),
        0.99,
      ),
      not202: sequential.filter((a) => a.status !== 202).length,
      edgeMeanMs: meanMs(before, after, "relay_edge_request_duration_seconds"),
      temporalStartMeanMs: meanMs(before, after, "relay_edge_temporal_start_duration_seconds"),
    },
    burst: {
      requests: answers.length,
      ratePerSecond: burstRate,
      sendSeconds,
      byStatus,
      refusedWithRetryAfter: refused.filter((a) => a.retryAfter).length,
      refusedWithoutRetryAfter: refused.filter((a) => !a.retryAfter).length,
      noAnswer: byStatus.none ?? 0,
      accepted: spread(accepted.map((a) => a.ms)),
      refused: spread(refused.map((a) => a.ms)),
      edgeMeanMs: { accepted: handled("2xx"), refused: handled("5xx") },
      delivered,
      duplicates,
      drainSeconds: Math.max(0, lastDelivery - lastAnswered) / 1000,
    },
  };
}

export function printBurst(r: BurstResult): void {
  const f = (n: number) => n.toFixed(2);
  const { sequential: s, burst: b } = r;
  console.log(`\n(f) async 202, 1 connection, ${s.requests} calls one after another\n`);
  console.log(
    // An immediate call's 202 waits for Postgres only; its workflow's start comes after it.
    "| p50 ms | p99 ms | not 202 | edge handler mean ms | Temporal start mean ms (after the 202) |",
  );
  console.log("|---|---|---|---|---|");
  console.log(
    `| ${f(s.p50Ms)} | ${f(s.p99Ms)} | ${s.not202} | ${f(s.edgeMeanMs)} | ${f(s.temporalStartMeanMs)} |`,
  );
  console.log(
    `\n(f) async burst: ${b.requests} calls open-loop at ${b.ratePerSecond}/s (sent in ${f(b.sendSeconds)} s)\n`,
  );
  const statuses = Object.entries(b.byStatus)
    .map(([status, n]) => `${status}: ${n}`)
    .join(", ");
  console.log("| what | figure |");
  console.log("|---|---|");
  console.log(`| answered, by status | ${statuses} |`);
  console.log(
    `| 429/503 with / without Retry-After | ${b.refusedWithRetryAfter} / ${b.refusedWithoutRetryAfter} |`,
  );
  console.log(`| no answer within ${answerTimeoutMs / 1000} s (must be 0) | ${b.noAnswer} |`);
  console.log(
    `| 202 p50 / p99 / max ms | ${f(b.accepted.p50Ms)} / ${f(b.accepted.p99Ms)} / ${f(b.accepted.maxMs)} |`,
  );
  console.log(
    `| 429/503 p50 / p99 / max ms | ${f(b.refused.p50Ms)} / ${f(b.refused.p99Ms)} / ${f(b.refused.maxMs)} |`,
  );
  console.log(
    `| the edge's own mean for 2xx / 5xx ms | ${f(b.edgeMeanMs.accepted)} / ${f(b.edgeMeanMs.refused)} |`,
  );
  const accepted = b.byStatus[202] ?? 0;
  console.log(
    `| delivered / 202'd (must be equal) | ${b.delivered} / ${accepted}${b.duplicates ? ` (${b.duplicates} more than once)` : ""} |`,
  );
  console.log(`| drain after the last answer | ${f(b.drainSeconds)} s |`);
}
