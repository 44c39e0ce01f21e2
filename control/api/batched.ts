/**
 * Requests the edge batched (edge/batcher.ts): while a batch makes their first attempts, no
 * workflow has their id. Their batch lists them in its RelayRequestIds search attribute and
 * holds them in its input, so the control plane finds them there, by a visibility query. Before
 * that, a request accepted and not started yet is in its kept start (store/accepted-starts.ts).
 */
import type { Client } from "@temporalio/client";
import type { DeliveryBatch, DeliveryInput } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { jsonPayloadValue, type PayloadJson, payloadFromJson } from "../../core/payload-codec.ts";
import { BATCH_WORKFLOW, searchAttributes } from "../../core/temporal.ts";
import { projectKey, storedPayloadValue } from "../../platform/temporal.ts";
import { keptStartOf } from "../../store/accepted-starts.ts";
import type { Ctx } from "./context.ts";

/**
 * A request id as the edge makes one (`req_` and base64url): only such an id goes into a query,
 * and any other is no batch's.
 */
const REQUEST_ID = /^req_[A-Za-z0-9_-]{1,64}$/;

/**
 * When to look for a request's batch, from the first look: Temporal indexes a workflow's search
 * attributes a moment after it starts it (10-20 ms here), so a read right after the 202 can miss
 * it. Few looks, spaced out: a namespace's visibility calls are rate-limited (10 a second by
 * default on Temporal's own server), and an id no batch lists takes them all.
 */
export const VISIBILITY_LOOKS_MS = [0, 50, 150, 350, 750];

export interface RunningBatch {
  workflowId: string;
  runId: string;
  project: string | undefined;
}

export const isRequestId = (id: string) => REQUEST_ID.test(id);

export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The running batch that lists `requestId`, by one visibility query; undefined when none does.
 * `running: false`: any batch that lists it, running or closed (within the namespace's retention).
 */
export async function runningBatchOf(
  client: Client,
  requestId: string,
  running = true,
): Promise<RunningBatch | undefined> {
  if (!isRequestId(requestId)) return undefined;
  const status = running ? ` AND ExecutionStatus = "Running"` : "";
  const query = `WorkflowType = "${BATCH_WORKFLOW}"${status} AND ${searchAttributes.requestIds} = "${requestId}"`;
  for await (const batch of client.workflow.list({ query, pageSize: 1 })) {
    return {
      workflowId: batch.workflowId,
      runId: batch.runId,
      project: batch.typedSearchAttributes.get(projectKey),
    };
  }
  return undefined;
}

/**
 * The input a running batch holds for `requestId`, from the batch's first history event. A batch
 * started a moment ago may not be listed yet, so this looks again (VISIBILITY_LOOKS_MS) unless
 * `inLog` says the request reached the log meanwhile; undefined when no batch lists it.
 */
export async function batchedInput(
  client: Client,
  project: string,
  requestId: string,
  inLog: () => Promise<unknown>,
): Promise<DeliveryInput | undefined> {
  if (!isRequestId(requestId)) return undefined;
  const started = Date.now();
  for (const at of VISIBILITY_LOOKS_MS) {
    await pause(started + at - Date.now());
    const batch = await runningBatchOf(client, requestId);
    // Another project's batch is no batch: its id takes as long to a 404 as an unknown one.
    if (batch?.project === project) return inputOf(client, batch, requestId);
    if (await inLog()) return undefined;
  }
  return undefined;
}

/** A project's reads that look for a request in Temporal at once, per control plane. */
export const LOOKUPS_PER_PROJECT = 8;
/** And how many more may wait for one of them; past these a read is 429. */
export const LOOKUPS_WAITING_PER_PROJECT = 64;

const lookups = new Map<string, { running: number; waiting: (() => void)[] }>();

/**
 * Runs `lookup` (a read's search of Temporal for a request not in the log: up to five visibility
 * queries) when fewer than LOOKUPS_PER_PROJECT of the project's run, after those waiting before
 * it; 429 when LOOKUPS_WAITING_PER_PROJECT wait already. One project's reads of unknown ids
 * cannot spend the namespace's visibility rate for everyone, and a burst of reads right after
 * their 202s only waits its turn.
 */
export async function boundedLookup<T>(project: string, lookup: () => Promise<T>): Promise<T> {
  const turns = lookups.get(project) ?? { running: 0, waiting: [] };
  lookups.set(project, turns);
  if (turns.running >= LOOKUPS_PER_PROJECT) {
    if (turns.waiting.length >= LOOKUPS_WAITING_PER_PROJECT) {
      throw new RelayError(
        "rate_limited",
        "too many reads of requests not yet logged at once in this project; retry in a second",
      );
    }
    // The slot is handed over by the read that ends: `running` stays counted.
    await new Promise<void>((resolve) => turns.waiting.push(resolve));
  } else {
    turns.running++;
  }
  try {
    return await lookup();
  } finally {
    const next = turns.waiting.shift();
    if (next) next();
    else if (--turns.running === 0) lookups.delete(project);
  }
}

/**
 * The input a batch that lists `requestId`, running or closed (within the namespace's retention),
 * holds for it: how a request delivered by its batch's first attempts replays.
 */
export async function anyBatchInput(
  client: Client,
  requestId: string,
): Promise<DeliveryInput | undefined> {
  const batch = await runningBatchOf(client, requestId, false);
  return batch && inputOf(client, batch, requestId);
}

/**
 * The input of a request of `projectId` accepted and not started yet (its edge has not made the
 * start, or the sweep is about to), from its kept start; undefined when none is kept.
 */
export async function keptInput(
  ctx: Pick<Ctx, "sql" | "payloadCipher">,
  projectId: string,
  requestId: string,
): Promise<DeliveryInput | undefined> {
  const start = await keptStartOf(ctx.sql, projectId, requestId);
  if (!start) return undefined;
  const { input } = JSON.parse(new TextDecoder().decode(start)) as {
    input?: { payloads?: PayloadJson[] };
  };
  const [sealed] = input?.payloads ?? [];
  if (!sealed) return undefined;
  const [payload] = await ctx.payloadCipher.decode([payloadFromJson(sealed)]);
  const value = jsonPayloadValue(payload) as DeliveryInput | DeliveryBatch;
  return "requests" in value ? value.requests.find((r) => r.requestId === requestId) : value;
}

async function inputOf(
  client: Client,
  batch: RunningBatch,
  requestId: string,
): Promise<DeliveryInput | undefined> {
  const page = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId: batch.workflowId, runId: batch.runId },
    maximumPageSize: 1,
  });
  const [payload] =
    page.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  if (!payload) return undefined;
  const { requests } = await storedPayloadValue<DeliveryBatch>(client, payload);
  return requests.find((request) => request.requestId === requestId);
}
