/**
 * One trace from caller to target. A stack of its own exports its spans over OTLP/HTTP to a
 * receiver in this process: an async, a sync and a stream call each make one trace, the caller's,
 * holding the edge's span, the workflow's, the activity's and the attempt's, each the child of the
 * one before, and the target gets a `traceparent` naming the attempt's span. The Deno edge makes
 * the same spans. The shared stack exports nothing: there the caller's `traceparent` reaches the target
 * untouched, no span of Relay's between them.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { logFile, type ManagedProcess } from "../dev/processes.ts";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import {
  type ControlPlane,
  denoEdgeProcess,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type Received,
  relay,
  type TargetSpec,
  targetServer,
} from "./helpers.ts";

interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
const plainValue = (v: OtlpValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? ""));
const attributesOf = (list: { key: string; value: OtlpValue }[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, plainValue(value)]));

/** An OTLP/HTTP collector (JSON): keeps every span it is sent, and the raw bodies. */
async function otlpReceiver() {
  const spans: ExportedSpan[] = [];
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      bodies.push(text);
      const sent = JSON.parse(text) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: OtlpValue }[] };
          scopeSpans: {
            spans: (Omit<ExportedSpan, "attributes" | "service"> & {
              attributes?: { key: string; value: OtlpValue }[];
            })[];
          }[];
        }[];
      };
      for (const { resource, scopeSpans } of sent.resourceSpans) {
        const service = String(attributesOf(resource.attributes)["service.name"]);
        for (const { spans: list } of scopeSpans) {
          for (const span of list) {
            spans.push({
              ...span,
              service,
              parentSpanId: span.parentSpanId ?? "",
              attributes: attributesOf(span.attributes),
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, bodies, close: () => server.close() };
}

const receiver = await otlpReceiver();
const traced: Record<string, string> = {
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  // Batches leave every 100 ms instead of 5 s, so the test need not wait.
  OTEL_BSP_SCHEDULE_DELAY: "100",
};
let stack: Stack;
let dir: string;
let edge: { edgeUrl: string; edgePort: number };
let control: ControlPlane;
const [denoPort = 0] = await freePorts(1);
const denoEdge = { edgeUrl: `http://127.0.0.1:${denoPort}`, edgePort: denoPort };
let deno: ManagedProcess;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "relay-tracing-"));
  const ports = await freeStackPorts();
  stack = await startStack({ dir, ports, output: join(dir, "stack.log"), env: traced });
  edge = { edgeUrl: stack.edgeUrl, edgePort: ports.edge };
  control = { controlUrl: stack.controlUrl, adminToken: stack.secrets.adminToken };
  deno = denoEdgeProcess(
    {
      RELAY_EDGE_PORT: String(denoPort),
      RELAY_CONTROL_URL: stack.controlUrl,
      RELAY_EDGE_TOKEN: stack.secrets.edgeToken,
      TEMPORAL_HTTP_ADDRESS: stack.temporal.httpAddress,
      RELAY_ALLOW_PRIVATE_TARGETS: "1",
      ...traced,
    },
    logFile(join(dir, "deno.log")),
  );
  await deno.start();
}, 240_000);
afterAll(async () => {
  await deno?.stop();
  await stack?.stop();
  receiver.close();
  await rm(dir, { recursive: true, force: true });
});

const CALLER_SPAN = "00f067aa0ba902b7";
const callerTraceparent = (traceId: string) => `00-${traceId}-${CALLER_SPAN}-01`;
const newTraceId = () => crypto.randomUUID().replaceAll("-", "");

/**
 * A trace is complete for a test once each of these spans came: the edge's ends after its
 * answer, so it may be exported after the workflow's.
 */
const withSpans =
  (...names: string[]) =>
  (spans: ExportedSpan[]) =>
    names.every((name) => spans.some((span) => span.name === name));

/** The spans of one trace, once `done` holds of them. */
function traceOf(traceId: string, done: (spans: ExportedSpan[]) => boolean) {
  return eventually(async () => {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    return done(spans) && spans;
  }, 20_000);
}

/** The span named `name` in `spans`, asserting there is exactly one. */
function only(spans: ExportedSpan[], name: string | RegExp): ExportedSpan {
  const found = spans.filter((s) =>
    typeof name === "string" ? s.name === name : name.test(s.name),
  );
  expect(
    found.map((s) => s.name),
    `one span ${name}`,
  ).toHaveLength(1);
  return found[0] as ExportedSpan;
}

/** `child`'s parent is `parent`, in the same trace. */
function expectChild(child: ExportedSpan, parent: ExportedSpan) {
  expect({ trace: child.traceId, parent: child.parentSpanId, name: child.name }).toEqual({
    trace: parent.traceId,
    parent: parent.spanId,
    name: child.name,
  });
}

/** The `traceparent` a target received, split: its trace and its parent span. */
function parentOf(received: Received) {
  const [, traceId, spanId] = String(received.headers.traceparent).split("-");
  return { traceId, spanId };
}

const setUp = (targets: TargetSpec[]) => projectWithEndpoint(targets, {}, "paid", control);

/**
 * edge → StartWorkflow → RunWorkflow → RunActivity → the attempt, each the child of the one
 * before; answers the attempt's span.
 */
function expectWorkflowChain(
  spans: ExportedSpan[],
  edgeSpan: ExportedSpan,
  workflow: string,
  activity: string,
  target = "t",
) {
  const start = only(spans, `StartWorkflow:${workflow}`);
  const run = only(spans, `RunWorkflow:${workflow}`);
  const execute = only(spans, `RunActivity:${activity}`);
  expectChild(start, edgeSpan);
  expectChild(run, start);
  expectChild(execute, run);
  expect([start.service, run.service, execute.service]).toEqual([
    "relay-edge",
    "relay-worker",
    "relay-worker",
  ]);
  expect(run.attributes.temporalWorkflowId).toBe(start.attributes.temporalWorkflowId);
  const attempt = only(spans, `POST ${target}`);
  expectChild(attempt, execute);
  return attempt;
}

describe("with the exporter on", () => {
  test("async: one trace from the caller's span through the edge, the workflow and the attempt to the target", async () => {
    const target = await targetServer();
    const p = await setUp([{ name: "t", targetUrl: target.url }]);
    const traceId = newTraceId();
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"secret":"body-text"}',
      headers: { traceparent: callerTraceparent(traceId) },
      edge,
    });
    expect(answer.status).toBe(202);
    const { requestId } = answer.json();
    const spans = await traceOf(traceId, withSpans("RunWorkflow:deliverRequest", "POST /v1/hook"));
    const edgeSpan = only(spans, "POST /v1/hook");
    expect(edgeSpan.parentSpanId).toBe(CALLER_SPAN);
    expect(edgeSpan.service).toBe("relay-edge");
    expect(edgeSpan.attributes).toMatchObject({
      "relay.request_id": requestId,
      "relay.project": p.slug,
      "relay.endpoint": "v1/hook",
      "http.response.status_code": 202,
    });
    const attempt = expectWorkflowChain(spans, edgeSpan, "deliverRequest", "firstAttempt");
    expect(attempt.attributes).toMatchObject({
      "relay.request_id": requestId,
      "relay.target": "t",
      "relay.attempt": 1,
      "http.response.status_code": 200,
    });
    const [delivery] = target.received;
    expect(delivery && parentOf(delivery)).toEqual({ traceId, spanId: attempt.spanId });
    const log = await finishedLog<{ status: string; traceId: string | null }>(p, requestId);
    expect(log.traceId).toBe(traceId);
    // The edge's log line for the call leads to the trace too.
    const logged = (await readFile(join(dir, "stack.log"), "utf8"))
      .split("\n")
      .find((line) => line.includes('"msg":"answered"') && line.includes(requestId));
    expect(logged).toContain(`"traceId":"${traceId}"`);
    // No body, key or secret rides on a span.
    const sent = receiver.bodies.join("\n");
    expect(sent).not.toContain("body-text");
    expect(sent).not.toContain(p.key);
    await target.close();
  });
  test("sync without a caller's traceparent: a new trace, the attempt's span the target's parent", async () => {
    const target = await targetServer();
    const p = await setUp([{ name: "t", targetUrl: target.url, deliveryMode: "sync" }]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge });
    expect(answer.status).toBe(200);
    const requestId = String(answer.headers["x-relay-request-id"]);
    const [delivery] = target.received;
    if (!delivery) throw new Error("the sync target was not called");
    const { traceId, spanId } = parentOf(delivery);
    const spans = await traceOf(
      String(traceId),
      withSpans("RunActivity:relaySyncCallsHere", "POST /v1/hook"),
    );
    const edgeSpan = only(spans, "POST /v1/hook");
    expect(edgeSpan.parentSpanId).toBe("");
    expect(edgeSpan.attributes).toMatchObject({
      "relay.request_id": requestId,
      "http.response.status_code": 200,
    });
    // Handed to a worker: its batch's workflow runs in the trace of the batch's first call, and
    // each call's attempt is the child of its own edge's hand-over, whichever batch it is in.
    const handOver = only(spans, "StartWorkflow:relaySync");
    expectChild(handOver, edgeSpan);
    const run = only(spans, "RunWorkflow:relaySyncBatch");
    expectChild(run, handOver);
    expectChild(only(spans, "RunActivity:relaySyncCallsHere"), run);
    const attempt = only(spans, "POST t");
    expectChild(attempt, handOver);
    expect(attempt.service).toBe("relay-worker");
    expect(attempt.spanId).toBe(spanId);
    expect(
      (await finishedLog<{ status: string; traceId: string | null }>(p, requestId)).traceId,
    ).toBe(traceId);
    await target.close();
  });

  test("stream: the edge's own attempt is the stream target's parent; the async mirror's workflow joins the same trace", async () => {
    const streamed = await targetServer();
    const mirror = await targetServer();
    const p = await setUp([
      { name: "t", targetUrl: streamed.url, deliveryMode: "stream" },
      { name: "mirror", targetUrl: mirror.url },
    ]);
    const traceId = newTraceId();
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { traceparent: callerTraceparent(traceId) },
      edge,
    });
    expect(answer.status).toBe(200);
    const spans = await traceOf(traceId, withSpans("RunWorkflow:deliverRequest", "POST /v1/hook"));
    const edgeSpan = only(spans, "POST /v1/hook");
    expect(edgeSpan.parentSpanId).toBe(CALLER_SPAN);
    const streamAttempt = only(spans, "POST t");
    expectChild(streamAttempt, edgeSpan);
    expect(streamAttempt.service).toBe("relay-edge");
    expect(parentOf(streamed.received[0] as Received)).toEqual({
      traceId,
      spanId: streamAttempt.spanId,
    });
    const mirrored = expectWorkflowChain(
      spans,
      edgeSpan,
      "deliverRequest",
      "firstAttempt",
      "mirror",
    );
    await eventually(async () => mirror.received.length > 0);
    expect(parentOf(mirror.received[0] as Received)).toEqual({ traceId, spanId: mirrored.spanId });
    await Promise.all([streamed.close(), mirror.close()]);
  });

  test("under Deno the edge makes the same spans, and the worker's continue them", async () => {
    const target = await targetServer();
    const p = await setUp([{ name: "t", targetUrl: target.url }]);
    const traceId = newTraceId();
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { traceparent: callerTraceparent(traceId) },
      edge: denoEdge,
    });
    expect(answer.status).toBe(202);
    const spans = await traceOf(traceId, withSpans("RunWorkflow:deliverRequest", "POST /v1/hook"));
    const edgeSpan = only(spans, "POST /v1/hook");
    expect(edgeSpan).toMatchObject({ parentSpanId: CALLER_SPAN, service: "relay-edge" });
    expect(edgeSpan.attributes["relay.request_id"]).toBe(answer.json().requestId);
    const attempt = expectWorkflowChain(spans, edgeSpan, "deliverRequest", "firstAttempt");
    await eventually(async () => target.received.length > 0);
    expect(parentOf(target.received[0] as Received)).toEqual({ traceId, spanId: attempt.spanId });
    await target.close();
  });

  test("a refused call's span says why, and nothing else is started", async () => {
    const p = await setUp([{ name: "t", targetUrl: "http://127.0.0.1:9/never" }]);
    const traceId = newTraceId();
    const answer = await relay(p.slug, "/v1/hook", {
      key: "rk_live_wrong",
      body: "{}",
      headers: { traceparent: callerTraceparent(traceId) },
      edge,
    });
    expect(answer.status).toBe(401);
    const [edgeSpan] = await traceOf(traceId, (s) => s.length > 0);
    expect(edgeSpan?.attributes).toMatchObject({
      "relay.refusal": "invalid_or_missing_key",
      "http.response.status_code": 401,
    });
    // The batch that carried it has gone; a start would have been in it or the next.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.spans.filter((s) => s.traceId === traceId).map((s) => s.name)).toEqual([
      "POST",
    ]);
  });
});

describe("with the exporter off (the shared stack)", () => {
  test("no span of Relay's: the caller's traceparent reaches the target as it came, and the log has no trace", async () => {
    const target = await targetServer();
    const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
    const traceparent = callerTraceparent(newTraceId());
    const answer = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "{}",
      headers: { traceparent },
    });
    expect(answer.status).toBe(202);
    await eventually(async () => target.received.length > 0);
    expect(target.received[0]?.headers.traceparent).toBe(traceparent);
    const log = await finishedLog<{ status: string; traceId: string | null }>(
      p,
      answer.json().requestId,
    );
    expect(log.traceId).toBeNull();
    await target.close();
  });
});
