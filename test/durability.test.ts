/**
 * At-least-once: a request answered 202 is delivered even when the worker is killed (SIGKILL)
 * while its delivery is in flight. A stack of its own, so the test can kill its worker.
 */
import { createServer } from "node:http";
import { Client, Connection } from "@temporalio/client";
import { request } from "undici";
import { expect, test } from "vitest";
import { eventually } from "./helpers.ts";
import { ownStack } from "./own-stack.ts";

// A lost attempt counts as lost after 3 s instead of 2 minutes.
const { stack, call, projectWithTarget } = ownStack("durability", {
  RELAY_ATTEMPT_TIMEOUT_MS: "3000",
  RELAY_RETRY_INITIAL_MS: "200",
});
const edgePort = () => Number(new URL(stack().edgeUrl).port);

/** A customer's endpoint that accepts every request, noting each one's request id. */
async function requestIdSink() {
  const received = new Set<string>();
  const sink = createServer((req, res) => {
    received.add(String(req.headers["x-relay-request-id"]));
    req.resume();
    res.end("ok");
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as { port: number }).port}/in`;
  return { received, sink, sinkUrl };
}

/** How many batch workflows the project's calls shared (the stack's Temporal, by visibility). */
async function batchesOf(slug: string): Promise<number> {
  const connection = await Connection.connect({ address: stack().temporal.address });
  try {
    const query = `RelayProject = "${slug}" AND WorkflowType = "deliverBatch"`;
    const { count } = await new Client({ connection }).workflow.count(query);
    return count;
  } finally {
    await connection.close();
  }
}

/** A customer's endpoint that never answers its first request and accepts every later one. */
async function holdsFirstRequest(held = 1) {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks).toString("utf8"));
      if (bodies.length > held) res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/in`,
    bodies,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test("a delivery in flight when its worker is SIGKILLed still arrives; the log shows both attempts", async () => {
  const target = await holdsFirstRequest();
  const { ownerToken, key: plaintext } = await projectWithTarget("durable", target.url, 60);

  const answer = await request(`${stack().edgeUrl}/v1/hook`, {
    method: "POST",
    headers: {
      host: `durable.localhost:${edgePort()}`,
      authorization: `Bearer ${plaintext}`,
      "content-type": "application/json",
    },
    body: '{"must":"arrive"}',
  });
  expect(answer.statusCode).toBe(202);
  const { requestId } = (await answer.body.json()) as { requestId: string };

  // The first attempt is in flight at the target: kill the worker holding it.
  await eventually(async () => target.bodies.length === 1);
  stack().processes.worker.kill();
  await stack().processes.worker.start();

  type Log = {
    status: string;
    attempts: { attempt: number; statusCode: number | null; error: string | null }[];
  };
  const log = await eventually(async () => {
    const found = (await call(ownerToken, "GET", `/projects/durable/requests/${requestId}`)) as Log;
    return found.status === "delivered" && found;
  }, 60_000);
  expect(target.bodies).toEqual(['{"must":"arrive"}', '{"must":"arrive"}']);
  expect(log.attempts).toMatchObject([
    { attempt: 1, statusCode: null, error: expect.stringMatching(/^lost/) },
    { attempt: 2, statusCode: 200, error: null },
  ]);
  target.close();
}, 120_000);

test("a sync call handed to a worker SIGKILLed mid-call: the edge goes through Temporal, and the caller gets the target's answer", async () => {
  const target = await holdsFirstRequest();
  const { ownerToken, key: plaintext } = await projectWithTarget(
    "syncdurable",
    target.url,
    30,
    "sync",
  );

  const answering = request(`${stack().edgeUrl}/v1/hook`, {
    method: "POST",
    headers: {
      host: `syncdurable.localhost:${edgePort()}`,
      authorization: `Bearer ${plaintext}`,
      "content-type": "application/json",
    },
    body: '{"must":"answer"}',
  });
  // The call is at the target, through the worker the edge handed it to: kill that worker.
  await eventually(async () => target.bodies.length === 1);
  stack().processes.worker.kill();
  await stack().processes.worker.start();

  const answer = await answering;
  expect(answer.statusCode).toBe(200);
  expect(await answer.body.text()).toBe("ok");
  const requestId = String(answer.headers["x-relay-request-id"]);
  // Called again through the call's own workflow: at least once, as async deliveries.
  expect(target.bodies).toEqual(['{"must":"answer"}', '{"must":"answer"}']);
  const log = await eventually(async () => {
    const found = await call(ownerToken, "GET", `/projects/syncdurable/requests/${requestId}`);
    return found.status === "delivered" && found;
  });
  expect(log.status).toBe("delivered");
  target.close();
}, 120_000);

test("sync calls sharing batches when their worker is SIGKILLed mid-call: every caller gets the target's answer, none hangs", async () => {
  const CALLS = 6;
  const target = await holdsFirstRequest(CALLS);
  const { key: plaintext } = await projectWithTarget("syncbatchdurable", target.url, 30, "sync");
  const answering = Array.from({ length: CALLS }, (_, i) =>
    request(`${stack().edgeUrl}/v1/hook`, {
      method: "POST",
      headers: {
        host: `syncbatchdurable.localhost:${edgePort()}`,
        authorization: `Bearer ${plaintext}`,
        "content-type": "application/json",
      },
      body: `{"n":${i}}`,
    }),
  );
  // Every call is at the target, through the worker's batches: kill that worker.
  await eventually(async () => target.bodies.length === CALLS);
  stack().processes.worker.kill();
  await stack().processes.worker.start();

  const answers = await Promise.all(answering);
  expect(answers.map((answer) => answer.statusCode)).toEqual(answers.map(() => 200));
  expect(await Promise.all(answers.map((answer) => answer.body.text()))).toEqual(
    answers.map(() => "ok"),
  );
  // Each called again through its own workflow, once: at least once, none more.
  const sent = Array.from({ length: CALLS }, (_, i) => `{"n":${i}}`);
  expect([...target.bodies].sort()).toEqual([...sent, ...sent].sort());
  target.close();
}, 120_000);

test("a batch whose first attempts are in flight when its worker is SIGKILLed: every 202'd request arrives, large bodies (by reference) whole", async () => {
  // Answers after 1 s, so the batch's attempts are in flight when the worker dies.
  const received = new Map<string, string>();
  const slow = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      setTimeout(() => {
        received.set(String(req.headers["x-relay-request-id"]), Buffer.concat(chunks).toString());
        res.end("ok");
      }, 1000);
    });
  });
  await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
  const slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}/in`;
  const { ownerToken, key: plaintext } = await projectWithTarget("batched", slowUrl, 30);

  // Every other body is over what a batch carries inline: it travels by reference.
  const bodies = Array.from({ length: 16 }, (_, i) =>
    JSON.stringify({ i, ...(i % 2 === 1 && { pad: "x".repeat(40 * 1024) }) }),
  );
  const answers = await Promise.all(
    bodies.map((body) =>
      request(`${stack().edgeUrl}/v1/hook`, {
        method: "POST",
        headers: { host: `batched.localhost:${edgePort()}`, authorization: `Bearer ${plaintext}` },
        body,
      }),
    ),
  );
  const ids = await Promise.all(
    answers.map(async (answer) => {
      expect(answer.statusCode).toBe(202);
      return ((await answer.body.json()) as { requestId: string }).requestId;
    }),
  );
  await eventually(async () => (await batchesOf("batched")) > 0);
  const log = (id: string) => call(ownerToken, "GET", `/projects/batched/requests/${id}`);
  // Their first attempts have started (they are in the log), none has been answered yet.
  await eventually(async () => (await Promise.all(ids.map(log))).every((l) => l.attempts));
  stack().processes.worker.kill();
  await stack().processes.worker.start();

  await eventually(async () => ids.every((id) => received.has(id)), 90_000);
  expect(ids.map((id) => received.get(id))).toEqual(bodies);
  await eventually(
    async () => (await Promise.all(ids.map(log))).every((l) => l.status === "delivered"),
    30_000,
  );
  slow.closeAllConnections();
  slow.close();
}, 150_000);

test("an edge SIGKILLed while batches of calls are being started: every 202'd request arrives", async () => {
  const { received, sink, sinkUrl } = await requestIdSink();
  const { key: plaintext } = await projectWithTarget("edgekill", sinkUrl, 30);
  /** A wave of calls at once: the ids of those answered 202 (a call cut off has none). */
  const wave = (size: number) =>
    Promise.all(
      Array.from({ length: size }, async (_, i) => {
        const answer = await request(`${stack().edgeUrl}/v1/hook`, {
          method: "POST",
          headers: {
            host: `edgekill.localhost:${edgePort()}`,
            authorization: `Bearer ${plaintext}`,
          },
          body: JSON.stringify({ i }),
        }).catch(() => null);
        if (answer?.statusCode !== 202) return [];
        return [((await answer.body.json()) as { requestId: string }).requestId];
      }),
    ).then((ids) => ids.flat());

  const before = await wave(16);
  const cut = wave(32);
  await new Promise((resolve) => setTimeout(resolve, 20));
  stack().processes.edge.kill();
  const during = await cut;
  await stack().processes.edge.start();
  const after = await wave(16);

  const accepted = [...before, ...during, ...after];
  expect(before).toHaveLength(16);
  expect(after).toHaveLength(16);
  await eventually(async () => accepted.every((id) => received.has(id)), 60_000);
  await eventually(async () => (await batchesOf("edgekill")) > 0);
  sink.close();
}, 120_000);

test("restarting Temporal (the same store: SQLite file or PostgreSQL) with requests and batches queued loses none", async () => {
  const { received, sink, sinkUrl } = await requestIdSink();
  const { ownerToken, key: plaintext } = await projectWithTarget("queued", sinkUrl, 30);

  // No worker: every request stays queued in Temporal while it restarts.
  await stack().processes.worker.stop();
  const ids: string[] = [];
  // One at a time (each its own workflow), then together (batches).
  const post = async (i: number) => {
    const answer = await request(`${stack().edgeUrl}/v1/hook`, {
      method: "POST",
      headers: { host: `queued.localhost:${edgePort()}`, authorization: `Bearer ${plaintext}` },
      body: JSON.stringify({ i }),
    });
    expect(answer.statusCode).toBe(202);
    return ((await answer.body.json()) as { requestId: string }).requestId;
  };
  for (let i = 0; i < 5; i++) ids.push(await post(i));
  ids.push(...(await Promise.all(Array.from({ length: 16 }, (_, i) => post(5 + i)))));
  await eventually(async () => (await batchesOf("queued")) > 0);
  await stack().restartTemporal();
  await stack().processes.worker.start();

  await eventually(async () => ids.every((id) => received.has(id)), 60_000);
  // Each request is settled from its attempts just after its delivery.
  const settled = async () => {
    const logs = await Promise.all(
      ids.map((id) => call(ownerToken, "GET", `/projects/queued/requests/${id}`)),
    );
    return logs.every((log) => log.status === "delivered");
  };
  await eventually(settled, 30_000);
  sink.close();
}, 120_000);

test("a recovery job goes on through kill -9 of the control plane and of the worker: every failure replayed, once", async () => {
  const received = new Map<string, number>();
  let healed = false;
  const target = createServer((req, res) => {
    const id = String(req.headers["x-relay-request-id"]);
    received.set(id, (received.get(id) ?? 0) + 1);
    req.resume();
    res.writeHead(healed ? 200 : 400).end();
  });
  await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(target.address() as { port: number }).port}/in`;
  const { ownerToken, key } = await projectWithTarget("recovering", url, 10);
  const base = "/projects/recovering";
  for (let i = 0; i < 40; i++) {
    const answer = await request(`${stack().edgeUrl}/v1/hook`, {
      method: "POST",
      headers: { host: `recovering.localhost:${edgePort()}`, authorization: `Bearer ${key}` },
      body: "{}",
    });
    expect(answer.statusCode).toBe(202);
  }
  const failures = async () => (await call(ownerToken, "GET", `${base}/failures`)).requests;
  await eventually(async () => ((await failures()) as unknown[]).length === 40, 60_000);
  healed = true;
  await call(ownerToken, "PUT", `${base}/lines/v1/endpoints/hook`, {
    targets: [{ name: "t", targetUrl: url, timeoutSeconds: 10, maxDeliveriesPerSecond: 5 }],
  });
  const { recoveryId } = await call(ownerToken, "POST", `${base}/recoveries`, {});
  const job = () => call(ownerToken, "GET", `${base}/recoveries/${recoveryId}`);
  const sentAtLeast = (n: number) =>
    eventually(async () => Number((await job()).sent) >= n, 60_000);

  await sentAtLeast(5);
  stack().processes.control.kill();
  await stack().processes.control.start();
  await sentAtLeast(15);
  stack().processes.worker.kill();
  await stack().processes.worker.start();
  const done = await eventually(async () => {
    const read = await job();
    return read.finishedAt !== null && read;
  }, 120_000);
  expect(done).toMatchObject({ state: "completed", matched: 40, sent: 40, failed: 0 });
  // Each request failed once, then reached the target by one replay (a second try only after
  // an attempt lost with the killed worker).
  expect(received.size).toBe(40);
  expect([...received.values()].every((n) => n === 2 || n === 3)).toBe(true);
  expect([...received.values()].filter((n) => n === 3).length).toBeLessThanOrEqual(5);
  target.close();
}, 240_000);
