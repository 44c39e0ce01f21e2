/**
 * Requests the edge batched (edge/batcher.ts) against the real stack: while its batch makes
 * their first attempts no workflow has their id, yet each reads at once (only to its project),
 * a cancel waits for that attempt and then answers as for any request, and the Temporal UI link
 * lists the batch beside the request's own workflow.
 */
import { createServer } from "node:http";
import { defineSearchAttributeKey } from "@temporalio/common";
import { chromium } from "playwright-core";
import { afterAll, expect, test } from "vitest";
import type { DeliveryBatch, DeliveryInput } from "../core/delivery.ts";
import { newId } from "../core/secrets.ts";
import { BATCH_WORKFLOW, searchAttributes } from "../core/temporal.ts";
import { requestWorkflowsUrl } from "../panel/src/temporal-ui.ts";
import { storedPayloadValue } from "../platform/temporal.ts";
import {
  api,
  eventually,
  finishedLog,
  newProject,
  projectWithEndpoint,
  type RequestLog,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

type Log = RequestLog & { requestId: string; line: string; endpoint: string };
type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

const temporal = await relayTemporal();
closers.push(() => temporal.connection.close());

const projectKey = defineSearchAttributeKey(searchAttributes.project, "KEYWORD");
const requestIdsKey = defineSearchAttributeKey(searchAttributes.requestIds, "KEYWORD_LIST");
/** No worker polls it: a batch started there stays before its first attempts. */
const IDLE_TASK_QUEUE = "relay-test-idle";
const CALLS = 24;

const logOf = (p: Project, requestId: string) =>
  api<Log>(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
const cancel = (p: Project, requestId: string) =>
  api<Log>(p.ownerToken, "DELETE", `${p.base}/requests/${requestId}`);
const ownWorkflow = (requestId: string) =>
  temporal.workflow
    .getHandle(requestId)
    .describe()
    .catch(() => null);

/** The ids the project's batches list (RelayRequestIds), once visibility has them. */
async function batchedIds(slug: string): Promise<Set<string>> {
  const ids = new Set<string>();
  const query = `WorkflowType = "${BATCH_WORKFLOW}" AND ${searchAttributes.project} = "${slug}"`;
  for await (const batch of temporal.workflow.list({ query })) {
    for (const id of batch.typedSearchAttributes.get(requestIdsKey) ?? []) ids.add(id);
  }
  return ids;
}

/** CALLS calls at once, so the edge batches most; by body (`{"i":n}`), the request ids. */
async function burst(p: Project) {
  const answers = await Promise.all(
    Array.from({ length: CALLS }, (_, i) =>
      relay(p.slug, "/v1/hook", { key: p.key, body: `{"i":${i}}` }),
    ),
  );
  const idOfBody = new Map<string, string>();
  answers.forEach((answer, i) => {
    expect(answer.status, answer.text).toBe(202);
    idOfBody.set(`{"i":${i}}`, answer.json().requestId);
  });
  const batched = await eventually(async () => {
    const ids = await batchedIds(p.slug);
    return ids.size > 0 && ids;
  });
  return { idOfBody, batched };
}

/**
 * A target that holds every call `holdMs`, then answers `status` (with Retry-After: 60, so a
 * retry comes no sooner); records each body as it arrives.
 */
async function heldTarget(holdMs: number, status: number) {
  const received: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push(Buffer.concat(chunks).toString("utf8"));
      setTimeout(() => {
        if (res.destroyed) return;
        res.writeHead(status, { "content-type": "application/json", "retry-after": "60" });
        res.end("{}");
      }, holdMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/in`, received };
}

/** A batched request whose first attempt the target holds: no workflow of its own yet. */
async function inFlightInBatch(
  p: Project,
  target: { received: string[] },
  idOfBody: Map<string, string>,
  batched: Set<string>,
) {
  return eventually(async () => {
    for (const body of target.received) {
      const id = idOfBody.get(body);
      if (id && batched.has(id) && !(await ownWorkflow(id))) {
        const log = await logOf(p, id);
        if (log.body.status === "delivering") return id;
      }
    }
    return undefined;
  }, 10_000);
}

test("a request its batch has not opened yet reads at once, only to its project; a cancel waits for its first attempt, then says it is still in flight", async () => {
  const sink = await targetServer();
  closers.push(sink.close);
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  // A delayed call's workflow input: what the edge would put in a batch for this project.
  const delayed = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", headers: { "Relay-Delay": "1h" } })
  ).json().requestId as string;
  closers.push(async () => void (await cancel(p, delayed)));
  // Started once accepted: just after its 202.
  const history = await eventually(() =>
    temporal.workflow
      .getHandle(delayed)
      .fetchHistory()
      .catch(() => null),
  );
  const [payload] =
    history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  if (!payload) throw new Error("no input");
  const { notBefore: _, ...template } = await storedPayloadValue<DeliveryInput>(temporal, payload);

  const ids = [newId("req"), newId("req"), newId("req")];
  const batch: DeliveryBatch = {
    project: p.slug,
    requests: ids.map((requestId) => ({ ...template, requestId })),
  };
  const handle = await temporal.workflow.start(BATCH_WORKFLOW, {
    taskQueue: IDLE_TASK_QUEUE,
    workflowId: `batch-${ids[0]}`,
    args: [batch],
    typedSearchAttributes: [
      { key: projectKey, value: p.slug },
      { key: requestIdsKey, value: ids },
    ],
  });
  closers.push(() => handle.terminate().then(() => {}));

  // At once, as a caller reads right after its 202: visibility may not list the batch yet.
  const reads = await Promise.all(ids.map((id) => logOf(p, id)));
  reads.forEach((read, i) => {
    expect(read.status, read.text).toBe(200);
    expect(read.body).toMatchObject({
      requestId: ids[i],
      status: "queued",
      line: "v1",
      endpoint: "hook",
      attempts: [],
    });
  });
  const other = await newProject();
  const elsewhere = await api(
    other.ownerToken,
    "GET",
    `/projects/${other.slug}/requests/${ids[0]}`,
  );
  expect(elsewhere.status).toBe(404);
  // Ids not as Relay makes them go into no query: simply not found.
  for (const odd of [newId("req"), `req_${ids[0]}"`, `${ids[0]}" OR WorkflowId != "x`]) {
    const read = await logOf(p, encodeURIComponent(odd));
    expect(read.status, odd).toBe(404);
  }

  const sent = Date.now();
  const refused = await cancel(p, ids[1] ?? "");
  expect(refused.status, refused.text).toBe(409);
  expect(refused.body).toEqual({
    error: { code: "conflict", message: expect.stringMatching(/first attempt.*try again/) },
  });
  expect(Date.now() - sent).toBeGreaterThanOrEqual(14_000);
  const notTheirs = await api(
    other.ownerToken,
    "DELETE",
    `/projects/${other.slug}/requests/${ids[1]}`,
  );
  expect(notTheirs.status).toBe(404);
  expect(sink.received).toEqual([]);
}, 90_000);

test("a cancel while a batched first attempt is in flight waits for it, then cancels the workflow the request continues as", async () => {
  const failing = await heldTarget(3000, 503);
  const p = await projectWithEndpoint([
    { name: "failing", targetUrl: failing.url, timeoutSeconds: 30 },
  ]);
  const { idOfBody, batched } = await burst(p);
  const requestId = await inFlightInBatch(p, failing, idOfBody, batched);

  const cancelled = await cancel(p, requestId);
  expect(cancelled.status, cancelled.text).toBe(200);
  expect(cancelled.body.status).toBe("cancelled");
  expect(cancelled.body.attempts.map((a) => a.statusCode)).toEqual([503]);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("cancelled");
  const body = [...idOfBody].find(([, id]) => id === requestId)?.[0];
  expect(failing.received.filter((b) => b === body)).toHaveLength(1);
}, 90_000);

test("a cancel while a batched first attempt is in flight that delivers answers request_already_delivered", async () => {
  const slow = await heldTarget(3000, 200);
  const p = await projectWithEndpoint([{ name: "slow", targetUrl: slow.url, timeoutSeconds: 30 }]);
  const { idOfBody, batched } = await burst(p);
  const requestId = await inFlightInBatch(p, slow, idOfBody, batched);

  const refused = await cancel(p, requestId);
  expect(refused.status, refused.text).toBe(409);
  expect(refused.body).toEqual({
    error: { code: "request_already_delivered", message: expect.any(String) },
  });
  expect((await finishedLog<Log>(p, requestId)).status).toBe("delivered");
}, 90_000);

test("a batched request that continues as its own workflow cancels as any, and the Temporal UI link lists it with its batch", async () => {
  // A retry more than a minute away: it continues as its own workflow (a shorter one waits in the batch).
  const down = await targetServer(() => ({ status: 503, headers: { "retry-after": "120" } }));
  closers.push(down.close);
  const p = await projectWithEndpoint([{ name: "down", targetUrl: down.url }]);
  const { idOfBody, batched } = await burst(p);
  // One that continued, between its first attempt and a retry.
  const requestId = await eventually(async () => {
    for (const id of batched) {
      if ((await ownWorkflow(id))?.status.name !== "RUNNING") continue;
      const { attempts } = (await logOf(p, id)).body;
      if (attempts.length === 1 && attempts[0]?.statusCode === 503) return id;
    }
    return undefined;
  });

  const cancelled = await cancel(p, requestId);
  expect(cancelled.status, cancelled.text).toBe(200);
  expect(cancelled.body.status).toBe("cancelled");
  expect(cancelled.body.attempts.map((a) => a.statusCode)).toEqual([503]);
  expect(await temporal.workflow.getHandle(requestId).result()).toBe("cancelled");
  const body = [...idOfBody].find(([, id]) => id === requestId)?.[0];
  expect(down.received.filter((r) => r.body === body)).toHaveLength(1);

  // The panel's link: the Temporal UI's list by that query shows both workflows.
  const uiUrl = stack().temporalUiUrl;
  if (!uiUrl) return; // Temporal's own server serves no UI
  const [batchId] = await batchesListing(requestId);
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    chromiumSandbox: false,
    args: ["--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
  closers.push(() => browser.close());
  const page = await browser.newPage();
  await page.goto(requestWorkflowsUrl(`${uiUrl}/namespaces/default/workflows`, requestId));
  for (const workflowId of [requestId, batchId ?? ""]) {
    await page.getByRole("link", { name: workflowId, exact: true }).first().waitFor();
  }
  // Filtered: the other requests' workflows are not listed.
  const others = [...idOfBody.values()].filter((id) => id !== requestId);
  for (const id of others) {
    expect(await page.getByRole("link", { name: id, exact: true }).count()).toBe(0);
  }
}, 90_000);

async function batchesListing(requestId: string): Promise<string[]> {
  const ids: string[] = [];
  const query = `${searchAttributes.requestIds} = "${requestId}"`;
  for await (const batch of temporal.workflow.list({ query })) ids.push(batch.workflowId);
  return ids;
}
