/**
 * Scale-out: a second control plane, worker and edge beside the stack's, on the same Postgres
 * and Temporal. Requests through either edge are delivered alike; stopping the second of each
 * mid-run loses nothing the edges accepted. Deliveries are counted by X-Relay-Delivery-Id, as a
 * deduplicating target would.
 */
import { createServer } from "node:http";
import { request } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import { finishedLog, projectWithEndpoint, stack, stackEnv, stackLog } from "./helpers.ts";

const REQUESTS = 60;
const [controlPort = 0, workerPort = 0, edgePort = 0] = await freePorts(3);
const shared = () => ({ ...stackEnv(), RELAY_DEV_CLOCK: "1" });
const second = {
  control: new ManagedProcess(
    {
      name: "control-2",
      entry: "control/main.ts",
      readyLine: "control plane listening",
      env: { ...shared(), RELAY_CONTROL_PORT: String(controlPort) },
    },
    stackLog(),
  ),
  worker: new ManagedProcess(
    {
      name: "worker-2",
      entry: "workflows/worker.ts",
      readyLine: "worker polling",
      env: { ...shared(), RELAY_WORKER_PORT: String(workerPort) },
    },
    stackLog(),
  ),
  edge: new ManagedProcess(
    {
      name: "edge-2",
      entry: "edge/main.ts",
      readyLine: "edge listening",
      env: {
        ...shared(),
        RELAY_EDGE_PORT: String(edgePort),
        RELAY_CONTROL_URL: `http://127.0.0.1:${controlPort}`,
      },
    },
    stackLog(),
  ),
};
const edges = () => [stack().edgePort, edgePort];

// A customer's endpoint that takes a moment, so deliveries are in flight when processes stop.
const received: string[] = [];
const sink = createServer((req, res) => {
  received.push(req.headers["x-relay-request-id"] as string);
  req.resume();
  setTimeout(() => res.end("{}"), 200);
});
await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
const sinkUrl = `http://127.0.0.1:${(sink.address() as { port: number }).port}/in`;
beforeAll(async () => {
  await second.control.start();
  await Promise.all([second.worker.start(), second.edge.start()]);
});
afterAll(async () => {
  await Promise.all(Object.values(second).map((p) => p.stop()));
  await new Promise((resolve) => sink.close(resolve));
});

async function send(port: number, project: string, key: string, n: number) {
  const response = await request(`http://127.0.0.1:${port}/v1/hook`, {
    method: "POST",
    headers: {
      host: `${project}.localhost:${port}`,
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ n }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, requestId: JSON.parse(text).requestId as string };
}

test("two of each process deliver alike; stopping the second of each loses nothing", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sinkUrl }]);
  const accepted: string[] = [];
  const byEdge = [0, 0];
  for (let n = 0; n < REQUESTS; n++) {
    if (n === REQUESTS / 2) {
      // Mid-run: the second worker, control plane and edge go away (graceful stops).
      await Promise.all([second.worker.stop(), second.control.stop(), second.edge.stop()]);
    }
    const which = n < REQUESTS / 2 ? n % 2 : 0;
    const answer = await send(edges()[which] as number, p.slug, p.key, n);
    expect(answer.status).toBe(202);
    accepted.push(answer.requestId);
    byEdge[which] = (byEdge[which] ?? 0) + 1;
  }

  let attempts = 0;
  for (const id of accepted) {
    // A task lost with the stopped worker is retried once its heartbeat or timeout runs out.
    const log = await finishedLog(p, id, 60_000);
    expect(log.status).toBe("delivered");
    attempts += log.attempts.length;
  }
  const delivered = new Set(received);
  const figures = {
    sent: REQUESTS,
    accepted: accepted.length,
    throughEdge1: byEdge[0],
    throughEdge2: byEdge[1],
    delivered: accepted.filter((id) => delivered.has(id)).length,
    targetCalls: received.length,
    attemptsLogged: attempts,
    lost: accepted.filter((id) => !delivered.has(id)).length,
  };
  console.log("scale-out", JSON.stringify(figures));
  expect(figures.lost).toBe(0);
  expect(figures.delivered).toBe(REQUESTS);
}, 120_000);
