/**
 * Every kind of call a real sender makes, beside the plain one, on one stack in one run (issue
 * 45; `npm run bench:shapes`): 32 callers for BENCH_SHAPES_SECONDS (10 s; 3 s quick) per kind,
 * each posting its next call on its last one's answer, each kind in a project of its own, then
 * the drain, until every delivery the kind owes reached the bench target (lost: not there
 * BENCH_SHAPES_DRAIN_SECONDS, 120, after the calls ended; a sync target's delivery is its
 * answer). CPU is the whole stack's (edge, control plane, worker, Temporal, Postgres; /proc)
 * over first call to drain end, per delivery (a fan-out's three targets are three). Plain calls
 * run before every kind and after the last, and each kind is read against the mean of the plain
 * stretches either side of it: a machine whose speed drifts during the run (a shared VM's moves
 * by 2x within the hour) moves both, and the plains' spread says by how much.
 * Checked per kind: every delivery made, none twice without a retry cause, every ordered key
 * in order (a call answered before another of its key was sent is delivered first). Between
 * kinds the bench waits (up to 10 min, not counted) until no delivery workflow runs, so one
 * kind's backlog does not load the next.
 * `BENCH_SHAPES=idempotent,ordered` runs some kinds only, by name's start (plain always runs).
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { Agent, request } from "undici";
import type { Stack } from "../dev/stack.ts";
import {
  benchStack,
  followReceipts,
  managementPost,
  percentile,
  quick,
  runBench,
  unlimitProject,
} from "./harness.ts";
import { STACK_PROCESSES, type StackProcess, stackCpu } from "./publish.ts";
import { type KindResult, print, summary, type WorkflowsStarted } from "./shapes-report.ts";

const seconds = Number(process.env.BENCH_SHAPES_SECONDS ?? (quick ? 3 : 10));
const CALLERS = 32;
/** A delivery not made this long after the calls ended counts as lost (the drain gives up). */
const LOST_AFTER_MS = Number(process.env.BENCH_SHAPES_DRAIN_SECONDS ?? 120) * 1000;
const ORDERED_KEYS = 1000;

/**
 * A JSON body of `bytes`, shaped as a webhook's (a list of events: ids, amounts, timestamps,
 * text), not one long string: the edge's parse and Postgres's compression of it cost what a real
 * body's cost (a string of one letter costs them almost nothing; docs/benchmarks.md).
 */
function bodyOf(bytes: number): string {
  const events: unknown[] = [];
  for (let i = 0, size = 12; size < bytes - 200; i++) {
    const event = {
      id: `evt_${((i * 2654435761) % 1e9).toString(36)}${i}`,
      amount: (i * 7919) % 100_000,
      currency: ["usd", "eur", "gbp"][i % 3],
      created: 1_733_400_000 + i * 37,
      description: `Order ${i} for customer cus_${((i * 40503) % 99991).toString(36)}`,
      paid: i % 5 !== 0,
    };
    events.push(event);
    size += JSON.stringify(event).length + 1;
  }
  const text = JSON.stringify({ data: events });
  return text + " ".repeat(Math.max(0, bytes - text.length));
}

/** An Idempotency-Key of its own for the `n`th call of `caller`. */
const uniqueKey = (c: number, n: number) => ({ "idempotency-key": `c${c}-n${n}-${Date.now()}` });

interface Kind {
  name: string;
  /** The endpoint: its targets (names under the target's /sink/), ordering. */
  targets: string[];
  /** Its one sync target, whose answer the caller waits for (at the target's /sync). */
  answering?: string;
  ordering?: "fifo";
  body?: string;
  /** Headers of the `n`th call (0-based) of caller `caller`. */
  headers?: (caller: number, n: number, seq: number) => Record<string, string>;
  /** The ordering key of a call, when the kind is ordered. */
  orderingKey?: (caller: number, seq: number) => string;
}

const KINDS: Kind[] = [
  { name: "plain", targets: ["plain"] },
  { name: "idempotent", targets: ["idempotent"], headers: uniqueKey },
  { name: "fan-out (3 targets)", targets: ["fan-a", "fan-b", "fan-c"] },
  { name: "32 KiB body", targets: ["large"], body: bodyOf(32 * 1024) },
  { name: "256 KiB body", targets: ["huge"], body: bodyOf(256 * 1024) },
  {
    name: "ordered: a key per caller",
    targets: ["ordered"],
    ordering: "fifo",
    orderingKey: (caller) => `caller-${caller}`,
  },
  {
    name: `ordered: ${ORDERED_KEYS} keys`,
    targets: ["ordered-many"],
    ordering: "fifo",
    orderingKey: (_, seq) => `key-${seq % ORDERED_KEYS}`,
  },
  {
    name: `ordered: ${ORDERED_KEYS} keys, an Idempotency-Key per call`,
    targets: ["ordered-keyed"],
    ordering: "fifo",
    orderingKey: (_, seq) => `key-${seq % ORDERED_KEYS}`,
    headers: uniqueKey,
  },
  { name: "first attempt 503 in four", targets: ["flaky"] },
  { name: "Relay-Delay: 2s", targets: ["delayed"], headers: () => ({ "relay-delay": "2s" }) },
  { name: "sync", targets: ["sync"], answering: "sync" },
  { name: "mirror (sync live + async shadow)", targets: ["live", "shadow"], answering: "live" },
];

/** The longest the bench waits between kinds for the last one's deliveries to end. */
const QUIET_WAIT_MS = 600_000;

/** Waits until no delivery workflow runs, so a kind's backlog does not load the next. */
async function quiet(client: Client): Promise<void> {
  const query = `ExecutionStatus = "Running" AND WorkflowType IN ("deliverRequest", "deliverBatch")`;
  const started = performance.now();
  while (performance.now() - started < QUIET_WAIT_MS) {
    const { count } = await client.workflow.count(query);
    if (count === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  console.log(`still delivering ${QUIET_WAIT_MS / 1000} s after the kind's drain: going on`);
}

/** Counts by type in Temporal's visibility, read once the kind drained (it lags a little). */
async function workflowsStarted(client: Client, from: Date, to: Date): Promise<WorkflowsStarted> {
  const window = `StartTime >= "${from.toISOString()}" AND StartTime <= "${to.toISOString()}"`;
  const count = async (type?: string) =>
    (await client.workflow.count(type ? `${window} AND WorkflowType = "${type}"` : window)).count;
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const [batches, requests, all] = await Promise.all([
    count("deliverBatch"),
    count("deliverRequest"),
    count(),
  ]);
  return { batches, requests, other: all - batches - requests };
}

interface KindProject {
  url: string;
  host: string;
  auth: string;
}

async function setUpKind(
  stack: Stack,
  targetPort: number,
  slug: string,
  kind: Kind,
): Promise<KindProject> {
  const call = managementPost(stack.controlUrl);
  const { ownerToken = "" } = await call(stack.secrets.adminToken, "/projects", {
    slug,
    name: kind.name,
    plan: "paid",
  });
  await unlimitProject(stack.controlUrl, stack.secrets.adminToken, slug);
  await call(ownerToken, `/projects/${slug}/lines`, { key: "v1" });
  await call(ownerToken, `/projects/${slug}/lines/v1/endpoints`, {
    path: "in",
    targets: kind.targets.map((name) => ({
      name,
      targetUrl: `http://127.0.0.1:${targetPort}/${name === kind.answering ? "sync" : `sink/${name}`}`,
      deliveryMode: name === kind.answering ? "sync" : "async",
    })),
    rateLimit: { requestsPerSecond: 1_000_000, burst: 1_000_000 },
    ...(kind.ordering && { ordering: kind.ordering }),
  });
  const { plaintext } = await call(ownerToken, `/projects/${slug}/keys`, {
    name: "bench",
    mode: "live",
  });
  return {
    url: `${stack.edgeUrl}/v1/in`,
    host: `${slug}.localhost`,
    auth: `Bearer ${plaintext}`,
  };
}

/** One ordered call: when it was sent and answered, and its first receipt. */
interface OrderedCall {
  sentAt: number;
  answeredAt: number;
  requestId: string;
}

async function runKind(
  project: KindProject,
  kind: Kind,
  cpu: () => Promise<Record<StackProcess, number>>,
  temporal: Client,
  targetPort: number,
  forSeconds: number,
): Promise<KindResult> {
  const sync = kind.answering !== undefined;
  /** Receipts of each request id, by target name; first receipt times. */
  const receipts = new Map<string, Map<string, number>>();
  const firstAt = new Map<string, number>();
  let owed = 0;
  let received = 0;
  let duplicates = 0;
  const follow = await followReceipts(`http://127.0.0.1:${targetPort}`, (line) => {
    const [id = "", target = ""] = line.split(" ");
    if (!kind.targets.includes(target)) return;
    const byTarget = receipts.get(id) ?? new Map<string, number>();
    receipts.set(id, byTarget);
    if (byTarget.has(target)) duplicates++;
    else {
      byTarget.set(target, performance.now());
      received++;
    }
    if (!firstAt.has(id)) firstAt.set(id, performance.now());
  });
  const dispatcher = new Agent({ connections: CALLERS });
  const callMs: number[] = [];
  const ordered = new Map<string, OrderedCall[]>();
  let calls = 0;
  let refused = 0;
  let seq = 0;
  const cpuStart = await cpu();
  const startedAt = new Date();
  const started = performance.now();
  const deadline = started + forSeconds * 1000;
  await Promise.all(
    Array.from({ length: CALLERS }, async (_, caller) => {
      for (let n = 0; performance.now() < deadline; n++) {
        const mySeq = seq++;
        const key = kind.orderingKey?.(caller, mySeq);
        const sentAt = performance.now();
        calls++;
        const answer = await request(project.url, {
          method: "POST",
          dispatcher,
          headers: {
            host: project.host,
            authorization: project.auth,
            "content-type": "application/json",
            "x-bench-seq": String(mySeq),
            ...(key && { "relay-ordering-key": key }),
            ...kind.headers?.(caller, n, mySeq),
          },
          body: kind.body ?? "{}",
        });
        const requestId = String(answer.headers["x-relay-request-id"] ?? "");
        await answer.body.dump();
        const ok = sync ? answer.statusCode === 200 : answer.statusCode === 202;
        if (!ok || !requestId) {
          refused++;
          continue;
        }
        const answeredAt = performance.now();
        callMs.push(answeredAt - sentAt);
        owed += kind.targets.length;
        if (sync) {
          received++;
          firstAt.set(requestId, answeredAt);
        }
        if (key) {
          const calls = ordered.get(key) ?? [];
          calls.push({ sentAt, answeredAt, requestId });
          ordered.set(key, calls);
        }
      }
    }),
  );
  const callsEnded = performance.now();
  while (received < owed && performance.now() - callsEnded < LOST_AFTER_MS) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const cpuEnd = await cpu();
  const drained = performance.now();
  await follow.stop();
  await dispatcher.close();
  const lastReceipt = [...firstAt.values()].reduce((last, at) => Math.max(last, at), started);
  return {
    name: kind.name,
    calls,
    refused,
    deliveries: received,
    owed,
    lost: owed - received,
    duplicates,
    outOfOrder: inversions(ordered, firstAt),
    callMs: [percentile(callMs, 0.5), percentile(callMs, 0.99)],
    deliveredPerSecond: (received * 1000) / (lastReceipt - started),
    drainSeconds:
      ((received < owed ? drained : Math.max(lastReceipt, callsEnded)) - callsEnded) / 1000,
    cpuMs: Object.fromEntries(
      STACK_PROCESSES.map((name) => [name, cpuEnd[name] - cpuStart[name]]),
    ) as Record<StackProcess, number>,
    workflows: await workflowsStarted(temporal, startedAt, new Date()),
  };
}

/**
 * Ordered calls delivered before a call of their key that was answered before they were sent:
 * the order Relay promises is its accept order, and calls in flight together have none.
 */
function inversions(ordered: Map<string, OrderedCall[]>, firstAt: Map<string, number>): number {
  let count = 0;
  for (const calls of ordered.values()) {
    for (const [i, later] of calls.entries()) {
      const laterAt = firstAt.get(later.requestId) ?? Number.POSITIVE_INFINITY;
      const overtaken = calls
        .slice(0, i)
        .some(
          (earlier) =>
            earlier.answeredAt < later.sentAt &&
            (firstAt.get(earlier.requestId) ?? Number.POSITIVE_INFINITY) > laterAt,
        );
      if (overtaken) count++;
    }
  }
  return count;
}

await runBench(async (cleanup) => {
  const only = process.env.BENCH_SHAPES?.split(",");
  const kinds = KINDS.filter(
    (k) => !only || k.name === "plain" || only.some((name) => k.name.startsWith(name)),
  );
  const dir = await mkdtemp(join(tmpdir(), "relay-shapes-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const { stack, targetPort } = await benchStack(cleanup, dir);
  const cpu = stackCpu(stack);
  const connection = await Connection.connect({ address: stack.temporal.address });
  cleanup.add(() => connection.close());
  const temporal = new Client({ connection });
  const loadBefore = loadavg();
  const [plain, ...rest] = kinds as [Kind, ...Kind[]];
  const plainProject = await setUpKind(stack, targetPort, "shape0", plain);
  const measure = async (project: KindProject, kind: Kind) => {
    const result = await runKind(project, kind, cpu, temporal, targetPort, seconds);
    console.log(JSON.stringify({ kind: result.name, ...summary(result) }));
    await quiet(temporal);
    return result;
  };
  await runKind(plainProject, plain, cpu, temporal, targetPort, seconds); // warm-up
  await quiet(temporal);
  const plains = [await measure(plainProject, plain)];
  const results: KindResult[] = [];
  for (const [i, kind] of rest.entries()) {
    results.push(await measure(await setUpKind(stack, targetPort, `shape${i + 1}`, kind), kind));
    plains.push(await measure(plainProject, plain));
  }
  if (rest.length === 0) plains.push(await measure(plainProject, plain));
  const report = {
    at: new Date(),
    seconds,
    callers: CALLERS,
    loadAverage: { before: loadBefore, after: loadavg() },
    plains,
    results,
  };
  print(report);
  await mkdir("bench/results", { recursive: true });
  await writeFile("bench/results/shapes.json", JSON.stringify(report, null, 2));
  console.log("\nwrote bench/results/shapes.json");
});
