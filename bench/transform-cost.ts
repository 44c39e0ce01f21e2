/**
 * What a target's transformation adds to a call (`npm run bench:transforms`, and last in
 * `npm run bench`): `sendToTarget` as the worker makes an async attempt (signed, through the
 * target dispatcher, the answer's start read) to an HTTP target on loopback in this process,
 * with and without a transformation run on Node's sandbox threads, calls of each kind alternating
 * so that all meet the same machine. A 64 KiB webhook (an event with a list of line items) under a
 * transformation that reshapes every item and sets a header, and under one that returns its input
 * (the sandbox's fixed cost: a thread hop, JSON in and out, a fresh QuickJS runtime); a small body
 * under one that sets a header. The bar: at most 5 ms added at p99. Beside them, the pool's run
 * alone, and the same run while another project's transformation loops forever.
 */
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { availableParallelism } from "node:os";
import { LOGGED_ANSWER_BYTES } from "../core/delivery.ts";
import type { DeliveryTarget, JsonObject } from "../core/model.ts";
import { decodeSigningSecret, importSigningKey, newSigningSecret } from "../core/signing.ts";
import { readAnswerStart, sendToTarget } from "../core/target-call.ts";
import { untraced } from "../core/tracing.ts";
import { type SandboxCall, sandboxCall } from "../core/transform.ts";
import { sandboxThreads } from "../core/transform-pool.ts";
import { hmacSha256 } from "../platform/node-crypto.ts";
import { targetCaller, targetDispatcher } from "../platform/targets.ts";
import { nodeTransformPool } from "../platform/transforms.ts";
import { percentile } from "./harness.ts";

/** Realistic: keeps two fields of each item (it reads and rebuilds the whole body) and a header. */
const RESHAPE = `(request) => ({
  ...request,
  headers: { ...request.headers, "x-shape": "v2" },
  body: { ...request.body, items: request.body.items.map((i) => ({ id: i.id, name: i.name })) },
})`;
const IDENTITY = "(request) => request";
const SET_HEADER = `(request) => ({ ...request, headers: { ...request.headers, "x-shape": "v2" } })`;
/** The neighbour's: each run holds a thread for its whole 50 ms, then fails. */
const LOOP_FOREVER = "(r) => { for (;;) {} }";

const CALLS = Number(process.env.BENCH_TRANSFORM_CALLS ?? 2_000);
const HOSTILE_RUNS = Number(process.env.BENCH_TRANSFORM_HOSTILE_RUNS ?? 200);
/** The neighbour's runs kept in flight: more than a small machine's threads, so some always wait. */
const HOSTILE_IN_FLIGHT = 4;

const utf8 = new TextEncoder();
const CALLER_HEADERS = { "content-type": "application/json", "user-agent": "Stripe/1.0" };

/** A JSON body of about `bytes`: an invoice event, as Stripe sends it, with its line items. */
function webhookBody(bytes: number): Uint8Array<ArrayBuffer> {
  const items: JsonObject[] = [];
  const event = {
    id: "evt_1QhT2bLkdIwHu7ix0c3Sg2fE",
    type: "invoice.paid",
    created: 1_764_000_000,
    livemode: true,
    customer: { id: "cus_R2sA9x", email: "billing@example.com", name: "Example Ltd" },
    items,
  };
  for (let n = 1; JSON.stringify(event).length < bytes; n++) {
    items.push({
      id: `il_${String(n).padStart(20, "0")}`,
      object: "line_item",
      name: `Seat ${n}`,
      description: `Team plan seat ${n}, billed monthly`,
      amount: 1200 + n,
      currency: "usd",
      quantity: 1,
      period: { start: 1_761_000_000, end: 1_763_600_000 },
      metadata: { seat: String(n), region: "eu-west-1" },
    });
  }
  return utf8.encode(JSON.stringify(event));
}

/** A target that reads each call whole and answers 200 at once; it keeps what it last received. */
async function startTarget(): Promise<{ server: Server; url: string; last: () => Received }> {
  let last: Received = { shape: undefined, bytes: 0 };
  const server = createServer((request, response) => {
    let bytes = 0;
    request.on("data", (chunk: Buffer) => {
      bytes += chunk.byteLength;
    });
    request.on("end", () => {
      last = { shape: request.headers["x-shape"], bytes };
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}/hooks/invoices`, last: () => last };
}

interface Received {
  shape: string | string[] | undefined;
  bytes: number;
}

const pool = nodeTransformPool();
/** The pool's size, as platform/transforms.ts sizes it. */
const THREADS = sandboxThreads(availableParallelism());
const dispatcher = targetDispatcher({ allowPrivate: true }); // the target is on loopback
const callTarget = targetCaller(dispatcher);
const receiver = await startTarget();
const signingKeys = [
  { key: await importSigningKey(decodeSigningSecret(newSigningSecret())), expiresAt: null },
];

const target = (transform?: string): DeliveryTarget => ({
  id: "tgt_bench",
  name: "bench",
  targetUrl: receiver.url,
  deliveryMode: "async",
  timeoutSeconds: 30,
  headers: {},
  ...(transform && { transform }),
});

/** Why a transformation failed: its delivery fails for good (a run past 50 ms among others). */
type Failed = { failed: string };

/** A kind's times in ms, and the reasons its transformation failed, once per failure. */
interface Samples {
  ms: number[];
  failures: string[];
}
const samples = (): Samples => ({ ms: [], failures: [] });
function add(into: Samples, result: number | Failed): void {
  if (typeof result === "number") into.ms.push(result);
  else into.failures.push(result.failed);
}

/**
 * One async attempt, as the worker makes it (workflows/target-answers.ts `callAndRead`): ms to
 * its answer's start, or why its transformation failed.
 */
async function callOnce(
  forTarget: DeliveryTarget,
  body: Uint8Array<ArrayBuffer>,
): Promise<number | Failed> {
  const started = performance.now();
  const sent = await sendToTarget(callTarget, {
    requestId: "req_bench",
    project: "good",
    target: forTarget,
    attempt: 1,
    callerHeaders: CALLER_HEADERS,
    body,
    signingKeys,
    signedAt: new Date(),
    hmac: hmacSha256,
    signal: new AbortController().signal,
    timeoutBounds: "answer",
    trace: untraced,
    transform: pool.run,
  });
  if ("failure" in sent && sent.failure.kind === "transform")
    return { failed: sent.failure.message };
  if (!("answer" in sent)) throw new Error(`the call failed: ${JSON.stringify(sent)}`);
  await readAnswerStart(sent, LOGGED_ANSWER_BYTES);
  if (sent.answer.status !== 200) throw new Error(`answered ${sent.answer.status}`);
  return performance.now() - started;
}

/** The pool's run alone, on the request the call would hand it: ms, or why it failed. */
async function runOnce(
  project: string,
  source: string,
  request: SandboxCall,
): Promise<number | Failed> {
  const started = performance.now();
  const outcome = await pool.run(project, source, request);
  if ("error" in outcome) return { failed: outcome.error };
  if (!("call" in outcome)) throw new Error("the transformation dropped the call");
  return performance.now() - started;
}

const bigBody = webhookBody(64 * 1024);
const smallBody = utf8.encode('{"id":1}');
const plain = target();

/** A transformed kind of call, measured beside the untransformed call on the same body. */
const transformed = (label: string, transform: string, body: Uint8Array<ArrayBuffer>) => ({
  label,
  transform,
  body,
  target: target(transform),
  /** What the pool's run is handed, as the call hands it. */
  input: sandboxCall(receiver.url, CALLER_HEADERS, body),
  calls: samples(),
  alone: samples(),
});
const reshape = transformed("reshape", RESHAPE, bigBody);
const kinds = [
  reshape,
  transformed("identity", IDENTITY, bigBody),
  transformed("header", SET_HEADER, smallBody),
];
const smallInput = sandboxCall(receiver.url, {}, smallBody);
const bodies = [bigBody, smallBody].map((body) => ({ body, plain: samples() }));

// The pool's threads start lazily and load QuickJS first: start them all, then warm this
// thread's code paths on every kind. The reshaped call must reach the target reshaped.
await Promise.all(
  Array.from({ length: 2 * THREADS }, () => pool.run("warm", IDENTITY, smallInput)),
);
for (let i = 0; i < 300; i++) {
  for (const { body } of bodies) await callOnce(plain, body);
  for (const kind of kinds) await callOnce(kind.target, kind.body);
}
while (typeof (await callOnce(reshape.target, bigBody)) !== "number") {}
const reshaped = receiver.last();
if (reshaped.shape !== "v2" || reshaped.bytes >= bigBody.byteLength / 2) {
  throw new Error(`the reshaped call arrived as ${JSON.stringify(reshaped)}`);
}

// Alternating: each round makes one call of every kind, so noise meets them all alike.
for (let i = 0; i < CALLS; i++) {
  for (const entry of bodies) add(entry.plain, await callOnce(plain, entry.body));
  for (const kind of kinds) add(kind.calls, await callOnce(kind.target, kind.body));
}
for (let i = 0; i < CALLS; i++) {
  for (const kind of kinds) add(kind.alone, await runOnce("good", kind.transform, kind.input));
}

/**
 * The good project's reshape, run alone while another project keeps HOSTILE_IN_FLIGHT runs that
 * loop forever waiting: the lines take turns, so it waits for one of them per thread at most.
 */
async function besideHostile(): Promise<{ good: Samples; hostileRuns: number }> {
  let stopping = false;
  let hostileRuns = 0;
  const hostile = Array.from({ length: HOSTILE_IN_FLIGHT }, async () => {
    while (!stopping) {
      const outcome = await pool.run("hostile", LOOP_FOREVER, smallInput);
      if (!("error" in outcome)) throw new Error("the endless loop ended");
      hostileRuns++;
    }
  });
  const good = samples();
  for (let i = 0; i < HOSTILE_RUNS + 10; i++) {
    const result = await runOnce("good", reshape.transform, reshape.input);
    if (i >= 10) add(good, result); // the first few meet the neighbour's runs just starting
  }
  stopping = true;
  await Promise.all(hostile);
  return { good, hostileRuns };
}
const hostile = await besideHostile();

await dispatcher.close();
receiver.server.close();
pool.close();

const ms = (value: number, width = 0) => value.toFixed(2).padStart(width);
const kib = (body: Uint8Array) => `${(body.byteLength / 1024).toFixed(1)} KiB`;
console.log(
  `${CALLS} calls of each kind, alternating; ms per call (sendToTarget, signed, to a loopback ` +
    `HTTP target, its answer's start read), in this process; ${THREADS} sandbox thread(s)`,
);
console.log(
  "body     | transform | p50 none | p50 with | p99 none | p99 with | p50 added | p99 added | run alone p50 | run alone p99 | failed",
);
let worstAdded = Number.NEGATIVE_INFINITY;
const failures: string[] = [];
for (const kind of kinds) {
  const plainMs = bodies.find((entry) => entry.body === kind.body)?.plain.ms ?? [];
  const [p50, p99] = [0.5, 0.99].map((q) => ({
    none: percentile(plainMs, q),
    with: percentile(kind.calls.ms, q),
  })) as [{ none: number; with: number }, { none: number; with: number }];
  worstAdded = Math.max(worstAdded, p99.with - p99.none);
  failures.push(...kind.calls.failures, ...kind.alone.failures);
  const cells = [
    kib(kind.body).padEnd(8),
    kind.label.padEnd(9),
    ms(p50.none, 8),
    ms(p50.with, 8),
    ms(p99.none, 8),
    ms(p99.with, 8),
    ms(p50.with - p50.none, 9),
    ms(p99.with - p99.none, 9),
    ms(percentile(kind.alone.ms, 0.5), 13),
    ms(percentile(kind.alone.ms, 0.99), 13),
    `${kind.calls.failures.length}+${kind.alone.failures.length}`.padStart(6),
  ];
  console.log(cells.join(" | "));
}
console.log(
  `failed: calls + runs alone whose transformation failed (left out of the times): ${
    failures.length === 0 ? "none" : countsOf(failures)
  }`,
);
console.log(
  `${kib(bigBody)} reshape run alone beside a project keeping ${HOSTILE_IN_FLIGHT} endless ` +
    `loops in flight (${hostile.hostileRuns} ended at the bound): p50 ` +
    `${ms(percentile(hostile.good.ms, 0.5))} ms, p99 ${ms(percentile(hostile.good.ms, 0.99))} ms ` +
    `(${hostile.good.ms.length} runs one at a time, ${hostile.good.failures.length} failed)`,
);
console.log(`added p99 ≤ 5 ms: ${worstAdded <= 5 ? "yes" : "no"} (worst ${ms(worstAdded)} ms)`);
const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"]).toString().trim();
console.log(`commit ${commit}, node ${process.version}`);

/** "2 × it ran past 50 ms, ..." */
function countsOf(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  return [...counts].map(([reason, count]) => `${count} × ${reason}`).join(", ");
}
