/**
 * Adaptive batching (issue 27): a project's immediate async calls that arrive together share one
 * deliverBatch workflow, and nothing a caller relies on changes: each is 202'd once its batch is
 * durable, delivered once, logged and charged as its own would be; one that fails continues as
 * its own workflow (id = request id); the batch is found from any of its request ids.
 */
import type { Client, WorkflowExecutionInfo } from "@temporalio/client";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type RequestLog,
  relay,
  relayTemporal,
  targetServer,
} from "./helpers.ts";

const closers: (() => Promise<void>)[] = [];
let temporal: Client;
beforeAll(async () => {
  temporal = await relayTemporal();
});
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await temporal?.connection.close();
});

async function target(...args: Parameters<typeof targetServer>) {
  const server = await targetServer(...args);
  closers.push(server.close);
  return server;
}

/** `count` calls of one project at once, as many callers would: their request ids. */
async function together(project: { slug: string; key: string }, count: number, headers = {}) {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      relay(project.slug, "/v1/hook", { key: project.key, body: JSON.stringify({ i }), headers }),
    ),
  );
  expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
  return answers.map((a) => a.json().requestId as string);
}

/** The project's workflows of one type, once visibility has them all. */
async function workflowsOf(slug: string, type: string): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  for await (const workflow of temporal.workflow.list({
    query: `RelayProject = "${slug}" AND WorkflowType = "${type}"`,
  })) {
    found.push(workflow);
  }
  return found;
}

const requestIdsOf = (batch: WorkflowExecutionInfo) =>
  (batch.searchAttributes.RelayRequestIds ?? []) as string[];

describe("calls of one project that arrive together", () => {
  test("share batch workflows, each delivered once, logged with its attempt and charged", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const ids = await together(project, 24);

    const logs = await Promise.all(ids.map((id) => finishedLog<RequestLog>(project, id)));
    expect(logs.map((log) => log.status)).toEqual(ids.map(() => "delivered"));
    for (const log of logs) expect(log.attempts).toMatchObject([{ statusCode: 200 }]);
    const receipts = sink.received.map((r) => r.headers["x-relay-request-id"]);
    expect(receipts.sort()).toEqual([...ids].sort());
    const usage = await api<{ pools: { live: { used: number; held: number } } }>(
      project.ownerToken,
      "GET",
      `${project.base}/usage`,
    );
    expect(usage.body.pools.live).toMatchObject({ used: 24, held: 0 });

    // Every request is in exactly one batch or has its workflow of its own; some were batched.
    const batches = await eventually(async () => {
      const listed = await workflowsOf(project.slug, "deliverBatch");
      const own = await workflowsOf(project.slug, "deliverRequest");
      const placed = [...listed.flatMap(requestIdsOf), ...own.map((w) => w.workflowId)];
      return placed.length === ids.length && listed;
    });
    expect(batches.length).toBeGreaterThan(0);
    const batched = batches.flatMap(requestIdsOf);
    expect(batched.length).toBeGreaterThan(1);
    expect(new Set(batched).size).toBe(batched.length);
    for (const id of batched) {
      await expect(temporal.workflow.getHandle(id).describe()).rejects.toThrow(/not found/i);
    }
  });

  test("calls with large bodies share batch workflows too, the bodies by reference, each delivered whole", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    // Over what a batch's input carries inline (16 KiB in base64): 32 KiB and 256 KiB.
    const bodies = Array.from({ length: 16 }, (_, i) =>
      JSON.stringify({ i, pad: String(i % 10).repeat(i % 4 === 0 ? 256 * 1024 : 32 * 1024) }),
    );
    const answers = await Promise.all(
      bodies.map((body) => relay(project.slug, "/v1/hook", { key: project.key, body })),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const ids = answers.map((a) => a.json().requestId as string);

    const logs = await Promise.all(ids.map((id) => finishedLog<RequestLog>(project, id)));
    expect(logs.map((log) => log.status)).toEqual(ids.map(() => "delivered"));
    const byId = new Map(sink.received.map((r) => [r.headers["x-relay-request-id"], r.body]));
    expect(ids.map((id) => byId.get(id))).toEqual(bodies);
    expect(sink.received).toHaveLength(ids.length);

    const batches = await eventually(async () => {
      const listed = await workflowsOf(project.slug, "deliverBatch");
      const own = await workflowsOf(project.slug, "deliverRequest");
      const placed = [...listed.flatMap(requestIdsOf), ...own.map((w) => w.workflowId)];
      return placed.length === ids.length && listed;
    });
    expect(batches.flatMap(requestIdsOf).length).toBeGreaterThan(1);
  });

  /** The first request id of the project's first batch, once the batch is visible. */
  async function firstBatched(slug: string): Promise<string> {
    const batches = await eventually(async () => {
      const listed = await workflowsOf(slug, "deliverBatch");
      return listed.length > 0 && listed;
    });
    const [id] = batches.flatMap(requestIdsOf);
    if (!id) throw new Error("no request was batched");
    return id;
  }

  // Fewer calls than the circuit's failure threshold (10), so the target is never held.
  test("a batched request whose first attempt failed is retried in its batch, with no workflow of its own", async () => {
    const seen = new Set<unknown>();
    const failsFirst = await target(({ headers }) => {
      const first = !seen.has(headers["x-relay-request-id"]);
      seen.add(headers["x-relay-request-id"]);
      return { status: first ? 503 : 200 };
    });
    const project = await projectWithEndpoint([{ name: "flaky", targetUrl: failsFirst.url }]);
    const ids = await together(project, 6);
    const batchedId = await firstBatched(project.slug);

    const log = await finishedLog<RequestLog>(project, batchedId);
    expect(log.status).toBe("delivered");
    expect(log.attempts.map((a) => a.statusCode)).toEqual([503, 200]);
    await expect(temporal.workflow.getHandle(batchedId).describe()).rejects.toThrow(/not found/i);
    for (const id of ids)
      expect((await finishedLog<RequestLog>(project, id)).status).toBe("delivered");
  });

  test("a batched request whose retry waits longer than a minute goes on as a workflow of its own", async () => {
    const later = await target(() => ({ status: 503, headers: { "retry-after": "90" } }));
    const project = await projectWithEndpoint([{ name: "later", targetUrl: later.url }]);
    const ids = await together(project, 6);
    const batchedId = await firstBatched(project.slug);
    const own = await eventually(() =>
      temporal.workflow
        .getHandle(batchedId)
        .describe()
        .catch(() => null),
    );
    expect(own.type).toBe("deliverRequest");
    for (const id of ids) await api(project.ownerToken, "DELETE", `${project.base}/requests/${id}`);
  });

  test("a batched request waiting in its batch for its retry is cancelled by its id", async () => {
    const busy = await target(() => ({ status: 503, headers: { "retry-after": "30" } }));
    const project = await projectWithEndpoint([{ name: "busy", targetUrl: busy.url }]);
    const ids = await together(project, 6);
    const batchedId = await firstBatched(project.slug);
    // Its first attempt logged, its retry 30 s away.
    await eventually(async () => {
      const read = await api<RequestLog>(
        project.ownerToken,
        "GET",
        `${project.base}/requests/${batchedId}`,
      );
      return read.body.attempts?.length === 1;
    });
    await expect(temporal.workflow.getHandle(batchedId).describe()).rejects.toThrow(/not found/i);

    const cancelled = await api<RequestLog>(
      project.ownerToken,
      "DELETE",
      `${project.base}/requests/${batchedId}`,
    );
    expect(cancelled.body.status).toBe("cancelled");
    expect(cancelled.body.attempts.map((a) => a.statusCode)).toEqual([503]);
    for (const id of ids.filter((id) => id !== batchedId)) {
      await api(project.ownerToken, "DELETE", `${project.base}/requests/${id}`);
    }
  });

  test("batched requests waiting for their limited target's room wait in their batch, each cancellable by its id", async () => {
    const slow = await target();
    const project = await projectWithEndpoint([
      { name: "slow", targetUrl: slow.url, maxDeliveriesPerSecond: 1, maxConcurrent: 1 },
    ]);
    const ids = await together(project, 8);
    const batch = await eventually(async () => {
      const [listed] = await workflowsOf(project.slug, "deliverBatch");
      return listed && requestIdsOf(listed).length > 2 && listed;
    });
    // One of its requests still waiting: on a busy machine the batch may be listed late, when its
    // first requests have had their turn (one a second).
    const { waitingId, reasons } = await eventually(async () => {
      for (const id of requestIdsOf(batch).toReversed()) {
        const read = await api(project.ownerToken, "GET", `${project.base}/requests/${id}`);
        const waiting = (read.body.waiting as { reason: string }[] | undefined) ?? [];
        if (waiting.length > 0) return { waitingId: id, reasons: waiting.map((w) => w.reason) };
      }
      return false;
    });
    expect(reasons).toEqual(["throttled"]);
    // No workflow of its own while it waits: its batch holds it.
    await expect(temporal.workflow.getHandle(waitingId).describe()).rejects.toThrow(/not found/i);

    const cancelled = await api<RequestLog>(
      project.ownerToken,
      "DELETE",
      `${project.base}/requests/${waitingId}`,
    );
    expect(cancelled.body.status).toBe("cancelled");
    // The others still arrive one a second; the cancelled one never does.
    await eventually(async () => slow.received.length >= ids.length - 1, 30_000);
    const arrived = slow.received.map((r) => r.headers["x-relay-request-id"]);
    expect(arrived).not.toContain(waitingId);
    expect(new Set(arrived)).toEqual(new Set(ids.filter((id) => id !== waitingId)));
  });

  test("delayed calls share batch workflows: each scheduled at once, delivered at its time and not before", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        relay(project.slug, "/v1/hook", {
          key: project.key,
          body: JSON.stringify({ i }),
          headers: { "relay-delay": "3s" },
        }),
      ),
    );
    expect(answers.map((a) => [a.status, a.json().status])).toEqual(
      answers.map(() => [202, "scheduled"]),
    );
    const ids = answers.map((a) => a.json().requestId as string);
    const [batch] = await eventually(async () => {
      const listed = await workflowsOf(project.slug, "deliverBatch");
      return listed.length > 0 && listed;
    });
    const batched = requestIdsOf(batch as WorkflowExecutionInfo);
    expect(batched.length).toBeGreaterThan(1);
    // In the log as scheduled while their batch waits, with no workflow of their own.
    for (const id of batched) {
      const read = await api<RequestLog>(
        project.ownerToken,
        "GET",
        `${project.base}/requests/${id}`,
      );
      expect(read.body.status).toBe("scheduled");
      await expect(temporal.workflow.getHandle(id).describe()).rejects.toThrow(/not found/i);
    }
    type Timed = { status: string; notBefore: string; attempts: { startedAt: string }[] };
    const logs = await Promise.all(ids.map((id) => finishedLog<Timed>(project, id)));
    for (const log of logs) {
      expect(log.status).toBe("delivered");
      const [attempt] = log.attempts;
      expect(Date.parse(attempt?.startedAt ?? "")).toBeGreaterThanOrEqual(
        Date.parse(log.notBefore),
      );
    }
    expect(sink.received.map((r) => r.headers["x-relay-request-id"]).sort()).toEqual(ids.sort());
  });

  test("a delayed call waiting in its batch is cancelled by its id and never delivered", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const ids = await together(project, 6, { "relay-delay": "30s" });
    const batchedId = await firstBatched(project.slug);
    const cancelled = await api<RequestLog>(
      project.ownerToken,
      "DELETE",
      `${project.base}/requests/${batchedId}`,
    );
    expect(cancelled.body.status).toBe("cancelled");
    expect(await temporal.workflow.getHandle(batchedId).result()).toBe("cancelled");
    for (const id of ids.filter((id) => id !== batchedId)) {
      const read = await api<RequestLog>(
        project.ownerToken,
        "GET",
        `${project.base}/requests/${id}`,
      );
      expect(read.body.status).toBe("scheduled");
      await api(project.ownerToken, "DELETE", `${project.base}/requests/${id}`);
    }
    expect(sink.received).toEqual([]);
  });

  test("calls with Idempotency-Keys share batch workflows; a repeat, in the same batch or later, answers what the first call did and is delivered once", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const send = (key: string, body = "{}", headers: Record<string, string> = {}) =>
      relay(project.slug, "/v1/hook", {
        key: project.key,
        body,
        headers: { "idempotency-key": key, ...headers },
      });
    // Twelve keys, each sent twice at once: a repeat may share its first call's group.
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, n) => send(`order-${n % 12}`)),
    );
    expect(answers.map((a) => [a.status, a.json().status])).toEqual(
      answers.map(() => [202, "queued"]),
    );
    const ids = answers.slice(0, 12).map((a) => a.json().requestId as string);
    expect(answers.slice(12).map((a) => a.json().requestId)).toEqual(ids);
    expect(new Set(ids).size).toBe(12);

    // Later repeats: immediate ones, a delayed one (whatever delay a repeat asks for), another body.
    const later = await Promise.all(ids.map((_, i) => send(`order-${i}`)));
    expect(later.map((a) => [a.status, a.json().requestId])).toEqual(ids.map((id) => [202, id]));
    const delayed = await send("order-0", "{}", { "relay-delay": "1s" });
    expect([delayed.status, delayed.json()]).toEqual([
      202,
      { status: "queued", requestId: ids[0] },
    ]);
    const reused = await send("order-1", '{"other":true}');
    expect([reused.status, reused.json().error.code]).toEqual([422, "idempotency_key_reused"]);

    const logs = await Promise.all(ids.map((id) => finishedLog<RequestLog>(project, id)));
    expect(logs.map((log) => log.status)).toEqual(ids.map(() => "delivered"));
    await new Promise((resolve) => setTimeout(resolve, 1500)); // past the delayed repeat's time
    const receipts = sink.received.map((r) => r.headers["x-relay-request-id"]);
    expect(receipts.sort()).toEqual([...ids].sort());

    const batches = await eventually(async () => {
      const listed = await workflowsOf(project.slug, "deliverBatch");
      return listed.length > 0 && listed;
    });
    expect(batches.flatMap(requestIdsOf).length).toBeGreaterThan(1);
  });

  test("a key whose first call went as a workflow of its own (delayed) keeps it: repeats that would share a batch are answered from it", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const send = (headers: Record<string, string> = {}) =>
      relay(project.slug, "/v1/hook", {
        key: project.key,
        body: "{}",
        headers: { "idempotency-key": "late", ...headers },
      });
    const first = await send({ "relay-delay": "1s" });
    expect([first.status, first.json().status]).toEqual([202, "scheduled"]);
    const { requestId } = first.json();
    const repeats = await Promise.all(Array.from({ length: 8 }, () => send()));
    expect(repeats.map((a) => [a.status, a.json()])).toEqual(
      repeats.map(() => [202, { status: "scheduled", requestId }]),
    );
    expect((await finishedLog<RequestLog>(project, requestId)).status).toBe("delivered");
    expect(sink.received.map((r) => r.headers["x-relay-request-id"])).toEqual([requestId]);
    const described = await temporal.workflow.getHandle(requestId).describe();
    expect(described.type).toBe("deliverRequest");
  });
});
