/**
 * What Temporal holds of a request: read as anyone with Temporal's API or UI reads it (no codec),
 * a delivery's history has neither the caller's body and headers nor a target's configured
 * headers, and a sync call's history not the target's answer; the search attributes stay
 * readable, so operators still find a project's workflows. An input in clear (anyone's who can
 * write to Temporal without the deployment's keys) is refused by the worker.
 */
import { createServer } from "node:http";
import { Code } from "@connectrpc/connect";
import { afterAll, expect, test } from "vitest";
import type { DeliveryInput } from "../core/delivery.ts";
import { DELIVERY_WORKFLOW, TASK_QUEUE } from "../core/temporal.ts";
import { EdgeService } from "../gen/relay/v1/edge_pb.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  newProject,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";
import { syncBatchOf } from "./starters.ts";

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

const secret = (what: string) => `${what}-${crypto.randomUUID()}`;

/**
 * A workflow's history through Temporal's HTTP API, in both of its payload forms, with every
 * payload's data and metadata decoded from base64 beside it: the text a reader of Temporal sees.
 */
async function historyAsSeen(workflowId: string): Promise<string> {
  const url = `${stack().temporalHttpAddress}/api/v1/namespaces/default/workflows/${workflowId}/history`;
  const pages = await Promise.all(
    [url, `${url}?noPayloadShorthand`].map(async (address) => {
      const response = await fetch(address);
      expect(response.status).toBe(200);
      return response.text();
    }),
  );
  const decoded: string[] = [];
  JSON.parse(pages[1] ?? "{}", (name, value) => {
    if (typeof value === "string" && (name === "data" || name === "encoding")) {
      decoded.push(Buffer.from(value, "base64").toString());
    }
    return value;
  });
  return [...pages, ...decoded].join("\n");
}

test("a delivery's history holds neither the caller's body and headers nor a target header's value", async () => {
  const [card, callerHeader, targetHeader] = [secret("4111"), secret("caller"), secret("target")];
  const target = await targetServer();
  closers.push(target.close);
  const p = await projectWithEndpoint([
    { name: "billing", targetUrl: target.url, headers: { "x-api-key": targetHeader } },
  ]);
  const body = JSON.stringify({ card });
  const answer = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body,
    headers: { "x-caller-note": callerHeader },
  });
  expect(answer.status).toBe(202);
  const { requestId } = answer.json() as { requestId: string };
  expect((await finishedLog(p, requestId)).status).toBe("delivered");
  // Delivered as sent: the target got all three.
  expect(target.received[0]?.body).toBe(body);
  expect(target.received[0]?.headers["x-api-key"]).toBe(targetHeader);
  expect(target.received[0]?.headers["x-caller-note"]).toBe(callerHeader);

  const seen = await historyAsSeen(requestId);
  expect(seen).toContain("binary/encrypted");
  for (const value of [card, callerHeader, targetHeader, Buffer.from(body).toString("base64")]) {
    expect(seen).not.toContain(value);
  }

  // Where it came in stays plain: operators list a project's workflows by it.
  const query = encodeURIComponent(`RelayProject="${p.slug}"`);
  const listed = await fetch(
    `${stack().temporalHttpAddress}/api/v1/namespaces/default/workflows?query=${query}`,
  ).then((response) => response.json() as Promise<{ executions?: unknown[] }>);
  expect(JSON.stringify(listed.executions)).toContain(requestId);
});

test("a sync call's history does not hold the target's answer, which the caller gets", async () => {
  const [answerSecret, headerSecret] = [secret("answer"), secret("header")];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json", "x-reply-note": headerSecret });
      res.end(JSON.stringify({ answerSecret }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/rpc`;
  const p = await projectWithEndpoint([
    { name: "rpc", targetUrl: url, deliveryMode: "sync", timeoutSeconds: 5 },
  ]);

  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(answer.status).toBe(200);
  expect(answer.json()).toEqual({ answerSecret });
  expect(answer.headers["x-reply-note"]).toBe(headerSecret);

  // Handed to a worker, the call ran in a batch, found by its request id; its caller may have
  // the answer before Temporal records the workflow's close.
  const batch = await syncBatchOf(answer.headers["x-relay-request-id"] as string);
  const seen = await eventually(async () => {
    const history = await historyAsSeen(batch);
    return history.includes("EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED") && history;
  });
  expect(seen).toContain("binary/encrypted");
  expect(seen).not.toContain(answerSecret);
  expect(seen).not.toContain(headerSecret);
});

test("an input in clear, written to Temporal by anyone, is refused: nothing is sent, logged or charged", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const attacker = await targetServer();
  closers.push(attacker.close);
  const p = await projectWithEndpoint([{ name: "hook", targetUrl: target.url }]);
  const endpoint = await api<{ targets: { id: string }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/lines/v1/endpoints/hook`,
  );
  const requestId = `req_plain${Date.now()}`;
  // A start through Temporal's HTTP API with a plain JSON input: the project's real target id,
  // the attacker's URL and body.
  const input: DeliveryInput = {
    requestId,
    project: p.slug,
    line: "v1",
    endpoint: "hook",
    keyMode: "live",
    receivedAt: new Date().toISOString(),
    headers: { "content-type": "application/json" },
    bodyBase64: Buffer.from('{"forged":true}').toString("base64"),
    bodyBytes: 15,
    targets: [
      {
        id: endpoint.body.targets[0]?.id ?? "",
        name: "hook",
        targetUrl: attacker.url,
        deliveryMode: "async",
        timeoutSeconds: 5,
        headers: {},
      },
    ],
  };
  const started = await fetch(
    `${stack().temporalHttpAddress}/api/v1/namespaces/default/workflows/${requestId}`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        workflowType: { name: DELIVERY_WORKFLOW },
        taskQueue: { name: TASK_QUEUE },
        input: [input],
      }),
    },
  );
  expect(started.status).toBe(200);
  const client = await relayTemporal();
  const handle = client.workflow.getHandle(requestId);
  try {
    // Its workflow task fails, and fails again on every try: the workflow never runs.
    await eventually(async () => {
      const { events } = await handle.fetchHistory();
      return events?.some((e) => e.workflowTaskFailedEventAttributes);
    });
    expect(target.received).toEqual([]);
    expect(attacker.received).toEqual([]);
    const read = await api(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
    expect(read.body.status ?? read.status).not.toBe("delivered");
    const usage = await api<{ pools: { live: { used: number } } }>(
      p.ownerToken,
      "GET",
      `${p.base}/usage`,
    );
    expect(usage.body.pools.live.used).toBe(0);
  } finally {
    await handle.terminate("test: refused input");
    await client.connection.close();
  }
});

test("the codec's keys go to edges alone, and none of them is the deployment's secret", async () => {
  const { ownerToken } = await newProject();
  for (const token of [ownerToken, stack().adminToken, "not-a-token"]) {
    await expect(memberClient(EdgeService, token).getPayloadKeys({})).rejects.toMatchObject({
      code: token === "not-a-token" ? Code.Unauthenticated : Code.PermissionDenied,
    });
  }
  const { keys } = await memberClient(EdgeService, stack().edgeToken).getPayloadKeys({});
  expect(keys).toHaveLength(1);
  expect(keys[0]?.key).toHaveLength(32);
  expect(Buffer.from(keys[0]?.key ?? []).toString("hex")).not.toBe(stack().encryptionKey);
});
