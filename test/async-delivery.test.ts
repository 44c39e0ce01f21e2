import { afterEach, describe, expect, test } from "vitest";
import {
  api,
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  targetServer,
} from "./helpers.ts";

type RequestLog = {
  requestId: string;
  status: string;
  line: string;
  endpoint: string;
  bodyBytes: number;
  attempts: {
    targetName: string;
    attempt: number;
    statusCode: number | null;
    error: string | null;
    latencyMs: number;
  }[];
};

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function target(...args: Parameters<typeof targetServer>) {
  const server = await targetServer(...args);
  closers.push(server.close);
  return server;
}

describe("an async request, end to end", () => {
  test("is answered 202 queued and delivered to every target, with the attempts logged", async () => {
    const [first, second] = [await target(), await target()];
    const project = await projectWithEndpoint([
      { name: "first", targetUrl: first.url },
      { name: "second", targetUrl: second.url, headers: { "x-customer": "configured" } },
    ]);
    const body = JSON.stringify({ order: 42, note: "héllo" });

    const answer = await relay(project.slug, "/v1/hook", {
      key: project.key,
      body,
      headers: { "x-trace": "abc", cookie: "session=secret" },
    });

    expect(answer.status).toBe(202);
    const { status, requestId } = answer.json();
    expect(status).toBe("queued");
    expect(requestId).toMatch(/^req_/);

    const log = await finishedLog<RequestLog>(project, requestId);
    expect(log).toMatchObject({ requestId, status: "delivered", line: "v1", endpoint: "hook" });
    expect(log.bodyBytes).toBe(Buffer.byteLength(body));
    expect(log.attempts.map((a) => [a.targetName, a.attempt, a.statusCode]).sort()).toEqual([
      ["first", 1, 200],
      ["second", 1, 200],
    ]);

    for (const server of [first, second]) {
      expect(server.received).toHaveLength(1);
      const [delivery] = server.received;
      expect(delivery?.body).toBe(body);
      expect(delivery?.headers["content-type"]).toBe("application/json");
      expect(delivery?.headers["x-trace"]).toBe("abc");
      expect(delivery?.headers["x-relay-request-id"]).toBe(requestId);
      expect(delivery?.headers["x-relay-delivery-id"]).toMatch(new RegExp(`^${requestId}\\.tgt_`));
      expect(delivery?.headers["x-relay-attempt"]).toBe("1");
      // The caller's credentials never reach a target.
      expect(delivery?.headers.authorization).toBeUndefined();
      expect(delivery?.headers.cookie).toBeUndefined();
    }
    expect(second.received[0]?.headers["x-customer"]).toBe("configured");
    expect(first.received[0]?.headers["x-relay-delivery-id"]).not.toBe(
      second.received[0]?.headers["x-relay-delivery-id"],
    );
  });

  test("a request whose targets answer at once completes in its first workflow task", async () => {
    const [first, second] = [await target(), await target()];
    const project = await projectWithEndpoint([
      { name: "first", targetUrl: first.url },
      { name: "second", targetUrl: second.url },
    ]);
    const { requestId } = (await relay(project.slug, "/v1/hook", { key: project.key })).json();
    await finishedLog<RequestLog>(project, requestId);

    const client = await relayTemporal();
    const events = (await client.workflow.getHandle(requestId).fetchHistory()).events ?? [];
    await client.connection.close();
    const count = (
      attribute:
        | "workflowTaskCompletedEventAttributes"
        | "activityTaskScheduledEventAttributes"
        | "workflowExecutionCompletedEventAttributes",
    ) => events.filter((event) => event[attribute]).length;
    // Every round trip through Temporal's queues is a workflow or activity task: one in all.
    expect(count("workflowTaskCompletedEventAttributes")).toBe(1);
    expect(count("activityTaskScheduledEventAttributes")).toBe(0);
    expect(count("workflowExecutionCompletedEventAttributes")).toBe(1);
  });

  test("a target answering 503 is retried and the log shows both attempts", async () => {
    const flaky = await target((_, index) => ({ status: index === 0 ? 503 : 200 }));
    const project = await projectWithEndpoint([{ name: "flaky", targetUrl: flaky.url }]);

    const { requestId } = (
      await relay(project.slug, "/v1/hook", { key: project.key, body: "{}" })
    ).json();

    const log = await finishedLog<RequestLog>(project, requestId);
    expect(log.status).toBe("delivered");
    expect(log.attempts.map((a) => [a.attempt, a.statusCode])).toEqual([
      [1, 503],
      [2, 200],
    ]);
    expect(flaky.received.map((r) => r.headers["x-relay-attempt"])).toEqual(["1", "2"]);
    expect(new Set(flaky.received.map((r) => r.headers["x-relay-delivery-id"])).size).toBe(1);
  });

  test("a target answering 400 is not retried; one failing target of two is partially_failed", async () => {
    const [rejecting, fine] = [await target(() => ({ status: 400 })), await target()];
    const project = await projectWithEndpoint([
      { name: "rejecting", targetUrl: rejecting.url },
      { name: "fine", targetUrl: fine.url },
    ]);

    const { requestId } = (
      await relay(project.slug, "/v1/hook", { key: project.key, body: "{}" })
    ).json();

    const log = await finishedLog<RequestLog>(project, requestId);
    expect(log.status).toBe("partially_failed");
    expect(log.attempts.filter((a) => a.targetName === "rejecting")).toMatchObject([
      { attempt: 1, statusCode: 400 },
    ]);
    expect(rejecting.received).toHaveLength(1);
  });

  test("every target refusing is failed, with the refusal logged per attempt", async () => {
    const gone = await target(() => ({ status: 410 }));
    const project = await projectWithEndpoint([{ name: "gone", targetUrl: gone.url }]);

    const { requestId } = (
      await relay(project.slug, "/v1/hook", { key: project.key, body: "{}" })
    ).json();

    const log = await finishedLog<RequestLog>(project, requestId);
    expect(log).toMatchObject({ status: "failed", attempts: [{ statusCode: 410, attempt: 1 }] });
  });
});

describe("retries", () => {
  test.each([429, 503])(
    "a %i with Retry-After: 2 is retried no sooner than 2 s later",
    async (status) => {
      const slow = await target((_, index) =>
        index === 0 ? { status, headers: { "retry-after": "2" } } : { status: 200 },
      );
      const project = await projectWithEndpoint([{ name: "slow", targetUrl: slow.url }]);
      const { requestId } = (
        await relay(project.slug, "/v1/hook", { key: project.key, body: "{}" })
      ).json();
      const log = await finishedLog<RequestLog>(project, requestId);
      expect(log.attempts.map((a) => a.statusCode)).toEqual([status, 200]);
      const [first, second] = slow.received;
      expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(2000);
    },
  );
});

describe("the request log", () => {
  test("lists newest first, pages by cursor, filters by status and endpoint", async () => {
    const [fine, rejecting] = [await target(), await target(() => ({ status: 400 }))];
    const project = await projectWithEndpoint([{ name: "fine", targetUrl: fine.url }]);
    await api(project.ownerToken, "POST", `${project.base}/lines/v1/endpoints`, {
      path: "other",
      targets: [{ name: "rejecting", targetUrl: rejecting.url }],
    });
    const ids: string[] = [];
    for (const path of ["/v1/hook", "/v1/hook", "/v1/other"]) {
      const { requestId } = (
        await relay(project.slug, path, { key: project.key, body: "{}" })
      ).json();
      ids.push(requestId);
      await finishedLog<RequestLog>(project, requestId);
    }
    type Page = { requests: RequestLog[]; nextCursor: string };
    const list = (query: string) =>
      api<Page>(project.ownerToken, "GET", `${project.base}/requests?${query}`);

    const first = await list("limit=2");
    expect(first.body.requests.map((r) => r.requestId)).toEqual([ids[2], ids[1]]);
    const second = await list(`limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.requests.map((r) => r.requestId)).toEqual([ids[0]]);
    expect(second.body.nextCursor).toBe("");

    expect((await list("status=failed")).body.requests.map((r) => r.requestId)).toEqual([ids[2]]);
    expect((await list("endpoint=v1/hook")).body.requests.map((r) => r.requestId)).toEqual([
      ids[1],
      ids[0],
    ]);
    expect((await list("status=lost")).status).toBe(400);
    expect((await list("cursor=garbage")).status).toBe(400);
  });
});

describe("large bodies", () => {
  test("a 5 MB body travels by reference and arrives intact, async and sync", async () => {
    const sink = await target();
    const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
    const body = JSON.stringify({ blob: "y".repeat(5 * 1024 * 1024 - 200) });

    const answer = await relay(project.slug, "/v1/hook", { key: project.key, body });
    expect(answer.status).toBe(202);
    const log = await finishedLog<RequestLog>(project, answer.json().requestId);
    expect(log).toMatchObject({ status: "delivered", bodyBytes: Buffer.byteLength(body) });
    expect(sink.received[0]?.body).toBe(body);

    const echo = await target();
    const sync = await projectWithEndpoint([
      { name: "live", targetUrl: echo.url, deliveryMode: "sync" },
    ]);
    expect((await relay(sync.slug, "/v1/hook", { key: sync.key, body })).status).toBe(200);
    expect(echo.received[0]?.body).toBe(body);
  });
});
