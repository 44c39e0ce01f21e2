/** The request log: every request and each target's attempts. */
import { type Client, isGrpcServiceError } from "@temporalio/client";
import { z } from "zod";
import { fromBase64 } from "../../core/base64.ts";
import { acceptedStatus, type DeliveryInput } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { loggedHeaders } from "../../core/headers.ts";
import { loggedBody } from "../../core/inspect.ts";
import { type RequestStatus, requestStatuses } from "../../core/model.ts";
import { DELIVERY_WORKFLOW } from "../../core/temporal.ts";
import { storedPayloadValue } from "../../platform/temporal.ts";
import { loadBody } from "../../store/bodies.ts";
import * as requestLog from "../../store/request-views.ts";
import { batchedInput, boundedLookup, keptInput } from "./batched.ts";
import { type Ctx, type ProjectAccess, projectAccess } from "./context.ts";
import { NO_CONTROL_CHARACTERS, parseInput } from "./validation.ts";

export type { AttemptView, RequestView } from "../../store/request-views.ts";

/** The first instant Postgres stores; no request was received before it. */
const FIRST_STORABLE = "0001-01-01T00:00:00.000Z";
const FIRST_STORABLE_MS = Date.parse(FIRST_STORABLE);

/**
 * A time bounding when requests were received. One before year 1 once its offset is applied
 * (`0001-01-01T01:10:49+05:51`) is a date-time Postgres cannot hold, and bounds the log as year 1
 * does: it is read as that.
 */
const receivedBound = z.iso
  .datetime({ offset: true })
  .transform((time) => (Date.parse(time) < FIRST_STORABLE_MS ? FIRST_STORABLE : time))
  .optional();

/** Which requests a list or a bulk replay covers. */
export const requestFilter = {
  status: z.enum(requestStatuses).optional(),
  /** "{line}/{endpoint}" */
  endpoint: z
    .string()
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are refused.
    .regex(/^[^/\x00-\x1f\x7f-\x9f]+\/[^/\x00-\x1f\x7f-\x9f]+$/, "must be '{line}/{endpoint}'")
    .optional(),
  requestId: z
    .string()
    .max(200)
    .regex(new RegExp(NO_CONTROL_CHARACTERS), "must be a request id")
    .optional()
    .describe("This request only"),
  idempotencyKey: z
    .string()
    .max(255)
    .regex(new RegExp(NO_CONTROL_CHARACTERS), "must be an Idempotency-Key: no control character")
    .optional()
    .describe("Requests whose caller sent this Idempotency-Key"),
  targetStatus: z.coerce
    .number()
    .int()
    .min(100)
    .max(599)
    .optional()
    .describe("Requests with an attempt a target answered with this HTTP status code"),
  receivedFrom: receivedBound.describe("Requests received at or after this time (RFC 3339)"),
  receivedTo: receivedBound.describe("Requests received before this time (RFC 3339)"),
};

export const listRequestsQuery = z.object({
  ...requestFilter,
  /** A `nextCursor` this API answered: base64url, never empty (the last page's is not sent). */
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, "not a cursor this API returned")
    .optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});

/** Opaque page cursor: the last row's (receivedAt, id). */
function encodeCursor(row: requestLog.RequestView): string {
  return Buffer.from(JSON.stringify([row.receivedAt.toISOString(), row.requestId])).toString(
    "base64url",
  );
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown[];
    if (typeof at === "string" && typeof id === "string" && !Number.isNaN(Date.parse(at))) {
      return [at, id];
    }
  } catch {}
  throw new RelayError("bad_request", "cursor: not a cursor this API returned");
}

/** Statuses of the failure queue: a request with a delivery that failed for good. */
export const failureStatuses: RequestStatus[] = ["failed", "partially_failed"];

/** A page of requests; `within` narrows to some statuses (the failure queue). */
export async function listRequests(
  ctx: Ctx,
  slug: string,
  query: unknown,
  within: RequestStatus[] = [...requestStatuses],
) {
  const access = await projectAccess(ctx, slug);
  const { status, endpoint, cursor, limit, receivedFrom, receivedTo, ...exactly } = parseInput(
    listRequestsQuery,
    query,
  );
  const [line, path] = endpoint?.split("/") ?? [];
  const statuses = status === undefined ? within : within.filter((s) => s === status);
  const rows = await requestLog.listRequests(ctx.sql, access.projectId, {
    ...exactly,
    statuses,
    endpoint: line === undefined ? undefined : { line, path: path ?? "" },
    receivedFrom: receivedFrom === undefined ? undefined : new Date(receivedFrom),
    receivedTo: receivedTo === undefined ? undefined : new Date(receivedTo),
    before: cursor === undefined ? undefined : decodeCursor(cursor),
    limit: limit + 1,
  });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { requests: page, nextCursor: rows.length > limit && last ? encodeCursor(last) : "" };
}

export async function getRequest(
  ctx: Ctx,
  slug: string,
  requestId: string,
): Promise<requestLog.RequestView> {
  return requestOf(ctx, await projectAccess(ctx, slug), requestId);
}

/** A request of the project the member has access to: in the log, or still being accepted. */
export async function requestOf(
  ctx: Ctx,
  access: ProjectAccess,
  requestId: string,
): Promise<requestLog.RequestView> {
  const logged = () => requestLog.findRequest(ctx.sql, access.projectId, requestId);
  const request =
    (await logged()) ??
    (await acceptedRequest(ctx, access, requestId, logged)) ??
    // Its workflow closed between the two reads: it wrote its row before it closed.
    (await logged());
  if (!request) throw new RelayError("not_found", `no request '${requestId}'`);
  return request;
}

/** How long a read waits for Temporal's answer about a request not yet in the log. */
const ACCEPTED_READ_DEADLINE_MS = 2000;
/** Temporal's WORKFLOW_EXECUTION_STATUS_RUNNING. */
const WORKFLOW_RUNNING = 1;
/** gRPC's NOT_FOUND, and INVALID_ARGUMENT (an id Temporal cannot hold): no such workflow. */
const NO_WORKFLOW = new Set([5, 3]);

/**
 * A request the edge accepted (202) whose worker has not opened it in the log yet: the log is
 * the worker's to write and the edge never touches Postgres, so for that moment its kept start
 * (accepted, not started yet: ./batched.ts keptInput) or Temporal is where it is. Its delivery
 * workflow (workflow id = request id), or under load the batch that
 * lists it (./batched.ts), exists once the 202 was sent; the first history event holds the
 * input the edge started it with, which says what the caller was told (queued or scheduled)
 * and, by its project, whose it is. Any control plane answers the same, from the one Temporal;
 * a request of another project, or none, is undefined.
 */
async function acceptedRequest(
  ctx: Ctx,
  { slug, projectId }: { slug: string; projectId: string },
  requestId: string,
  logged: () => Promise<unknown>,
): Promise<requestLog.RequestView | undefined> {
  const input =
    (await keptInput(ctx, projectId, requestId)) ??
    (await boundedLookup(slug, () => startedInput(ctx, slug, requestId, logged)));
  if (input?.project !== slug) return undefined;
  const receivedAt = new Date(input.receivedAt);
  return {
    requestId,
    status: acceptedStatus(input),
    line: input.line,
    endpoint: input.endpoint,
    receivedAt,
    notBefore: input.notBefore ? new Date(input.notBefore) : null,
    traceId: input.traceId ?? null,
    updatedAt: receivedAt,
    bodyBytes: input.bodyBytes,
    idempotencyKey: input.headers["idempotency-key"] ?? null,
    resentFrom: input.resentFrom ?? null,
    contentErasedAt: null,
    headers: loggedHeaders(input.headers, input.secretHeaders),
    body: loggedBody(await inputBody(ctx, input)),
    attempts: [],
    callbacks: [],
    waiting: [],
    skipped: input.skipped ?? [],
  };
}

/** A request's input from its workflow, or its batch's, in Temporal. */
async function startedInput(
  ctx: Ctx,
  slug: string,
  requestId: string,
  logged: () => Promise<unknown>,
): Promise<DeliveryInput | undefined> {
  const unreadable = () =>
    new RelayError("unavailable", "the request log cannot be read now; try again");
  const client = await ctx.temporal().catch(() => {
    throw unreadable();
  });
  return client
    .withDeadline(Date.now() + ACCEPTED_READ_DEADLINE_MS, async () => {
      const own = await ownInput(client, requestId);
      if (own !== "none" && own?.project === slug) return own;
      // Another project's workflow, or one that ended, answers after every look, as an
      // unknown id does: the time to a 404 tells nothing of other projects.
      return batchedInput(client, slug, requestId, logged);
    })
    .catch(() => {
      throw unreadable();
    });
}

/** The body a delivery input carries: inline (base64, or text before that) or by reference. */
function inputBody(ctx: Ctx, input: DeliveryInput): Promise<Uint8Array> | Uint8Array {
  if (input.bodyRef) return loadBody(ctx.sql, input.bodyRef);
  return input.body === undefined
    ? fromBase64(input.bodyBase64)
    : new TextEncoder().encode(input.body);
}

/**
 * The input of the running delivery workflow of `requestId`'s id; "none" when no workflow has
 * that id (a batched request, or none), undefined when one has but it is not a running delivery.
 */
async function ownInput(
  client: Client,
  requestId: string,
): Promise<DeliveryInput | "none" | undefined> {
  const { namespace } = client.options;
  const execution = { workflowId: requestId };
  const found = await Promise.all([
    client.workflowService.describeWorkflowExecution({ namespace, execution }),
    client.workflowService.getWorkflowExecutionHistory({
      namespace,
      execution,
      maximumPageSize: 1,
    }),
  ]).catch((error: unknown) => {
    if (isGrpcServiceError(error) && NO_WORKFLOW.has(error.code)) return null;
    throw error;
  });
  if (!found) return "none";
  const [described, page] = found;
  // Only a running workflow can be ahead of its log row: one that ended without a row is a
  // request the log's retention has removed since.
  if (described.workflowExecutionInfo?.status !== WORKFLOW_RUNNING) return undefined;
  const started = page.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const [payload] = started?.input?.payloads ?? [];
  if (started?.workflowType?.name !== DELIVERY_WORKFLOW || !payload) return undefined;
  return storedPayloadValue<DeliveryInput>(client, payload);
}
