/**
 * A bounded adversarial run against the test stack (`npm run fuzz` is the long one): malformed
 * inbound and management requests on raw sockets get no answer of 500 and take no process
 * down. The requests the issue reproduced are named here too, each expecting a 4xx.
 */
import { gzipSync } from "node:zlib";
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { FuzzTarget } from "../bench/fuzz-probes.ts";
import { http1, send } from "../bench/fuzz-wire.ts";
import { fuzz, fuzzProject } from "../bench/fuzzer.ts";
import { stack, targetServer } from "./helpers.ts";

const sink = await targetServer();
let target: FuzzTarget;

beforeAll(async () => {
  const project = await fuzzProject(stack().controlUrl, stack().adminToken, sink.url);
  target = {
    edgePort: stack().edgePort,
    controlPort: Number(new URL(stack().controlUrl).port),
    project,
    adminToken: stack().adminToken,
  };
});
afterAll(() => sink.close());

async function everyProcessAnswers() {
  for (const url of [stack().controlUrl, stack().edgeUrl, stack().workerUrl]) {
    const answer = await request(`${url}/healthz`);
    await answer.body.dump();
    expect(answer.statusCode, url).toBe(200);
  }
}

test("1,500 malformed requests: no answer of 500, every process still up", async () => {
  const report = await fuzz(target, {
    count: 1500,
    concurrency: 8,
    seed: 12,
    deadline: Date.now() + 60_000,
  });
  expect(report.sent).toBe(1500);
  expect(report.internalErrors, JSON.stringify(report.byKind)).toEqual([]);
  await everyProcessAnswers();
}, 90_000);

const edge = (requestLine: string, host: string) =>
  http1(requestLine, [
    ["Host", host],
    ["Connection", "close"],
  ]);
const slugHost = () => `${target.project.slug}.localhost:${target.edgePort}`;
const withOwner = (requestLine: string, headers: [string, string][] = [], body?: Buffer) =>
  http1(
    requestLine,
    [
      ["Host", "127.0.0.1"],
      ["Authorization", `Bearer ${target.project.ownerToken}`],
      ["Connection", "close"],
      ...headers,
    ],
    body,
  );

test.each<[string, "edge" | "control", () => Buffer]>([
  ["edge: absolute-form target", "edge", () => edge("POST http://x/v1/hook HTTP/1.1", slugHost())],
  ["edge: asterisk target", "edge", () => edge("OPTIONS * HTTP/1.1", slugHost())],
  [
    "edge: Host with port 99999",
    "edge",
    () => edge("POST /v1/hook HTTP/1.1", `${target.project.slug}.localhost:99999`),
  ],
  ["edge: Host %00.localhost", "edge", () => edge("POST /v1/hook HTTP/1.1", "%00.localhost")],
  ["edge: Host [::1]", "edge", () => edge("POST /v1/hook HTTP/1.1", "[::1]")],
  [
    "edge: a 16 KB Host label",
    "edge",
    () => edge("POST /v1/hook HTTP/1.1", `${"a".repeat(16_000)}.localhost`),
  ],
  ["edge: %E0 in the path", "edge", () => edge("POST /v1/%E0 HTTP/1.1", slugHost())],
  [
    "control: %E0 in a REST path",
    "control",
    () => withOwner(`GET /projects/${target.project.slug}/requests/%E0 HTTP/1.1`),
  ],
  [
    "control: NUL in a REST path",
    "control",
    () => withOwner(`GET /projects/${target.project.slug}/requests/req_%00 HTTP/1.1`),
  ],
  [
    "control: an empty Host on a Connect path",
    "control",
    () =>
      http1(
        "POST /relay.v1.ProjectService/ListProjects HTTP/1.1",
        [
          ["Host", ""],
          ["Content-Type", "application/json"],
          ["Connection", "close"],
        ],
        Buffer.from("{}"),
      ),
  ],
  [
    "control: gzip bomb to Connect, no token",
    "control",
    () =>
      http1(
        "POST /relay.v1.ProjectService/ListProjects HTTP/1.1",
        [
          ["Host", "127.0.0.1"],
          ["Content-Type", "application/json"],
          ["Content-Encoding", "gzip"],
          ["Connection", "close"],
        ],
        gzipSync(Buffer.alloc(64 * 1024 * 1024)),
      ),
  ],
  [
    "control: gzip bomb to REST",
    "control",
    () =>
      withOwner(
        `POST /projects/${target.project.slug}/lines HTTP/1.1`,
        [
          ["Content-Type", "application/json"],
          ["Content-Encoding", "gzip"],
        ],
        gzipSync(Buffer.alloc(64 * 1024 * 1024)),
      ),
  ],
])("%s: a 4xx", async (_name, component, build) => {
  const port = component === "edge" ? target.edgePort : target.controlPort;
  const answer = await send(port, {
    component,
    kind: "named",
    parts: [build()],
    timeoutMs: 15_000,
  });
  expect(answer).toBeGreaterThanOrEqual(400);
  expect(answer).toBeLessThan(500);
  await everyProcessAnswers();
});
