/** The request log: every request and each target's attempts. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { type RequestStatus, requestStatuses } from "../../core/model.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export interface AttemptView {
  targetId: string;
  targetName: string;
  attempt: number;
  startedAt: Date;
  statusCode: number | null;
  /** Null while the attempt is in flight (or was lost with its worker). */
  latencyMs: number | null;
  error: string | null;
}

export interface RequestView {
  requestId: string;
  status: RequestStatus;
  line: string;
  endpoint: string;
  receivedAt: Date;
  updatedAt: Date;
  bodyBytes: number;
  attempts: AttemptView[];
}

const listSchema = z.object({
  status: z.enum(requestStatuses).optional(),
  /** "{line}/{endpoint}" */
  endpoint: z
    .string()
    .regex(/^[^/]+\/[^/]+$/, "must be '{line}/{endpoint}'")
    .optional(),
  cursor: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});

/** Opaque page cursor: the last row's (receivedAt, id). */
function encodeCursor(row: RequestView): string {
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
  const { status, endpoint, cursor, limit } = parseInput(listSchema, query);
  const [line, path] = endpoint?.split("/") ?? [];
  const after = cursor === undefined ? null : decodeCursor(cursor);
  const statuses = status === undefined ? within : within.filter((s) => s === status);
  const sql = ctx.sql;
  const rows = await selectRequests(
    ctx,
    access.projectId,
    sql`
      and status in ${sql(statuses.length > 0 ? statuses : ["none"])}
      ${line === undefined ? sql`` : sql`and line_key = ${line} and endpoint_path = ${path ?? ""}`}
      ${after === null ? sql`` : sql`and (received_at, id) < (${after[0]}::timestamptz, ${after[1]})`}
      order by received_at desc, id desc
      limit ${limit + 1}`,
  );
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { requests: page, nextCursor: rows.length > limit && last ? encodeCursor(last) : "" };
}

export async function getRequest(ctx: Ctx, slug: string, requestId: string): Promise<RequestView> {
  const access = await projectAccess(ctx, slug);
  const [request] = await selectRequests(ctx, access.projectId, ctx.sql`and id = ${requestId}`);
  if (!request) throw new RelayError("not_found", `no request '${requestId}'`);
  return request;
}

/** A project's requests matching `filter` (a fragment after the project condition). */
async function selectRequests(
  ctx: Ctx,
  projectId: string,
  filter: ReturnType<Ctx["sql"]>,
): Promise<RequestView[]> {
  const rows = await ctx.sql<Omit<RequestView, "attempts">[]>`
    select id as request_id, status, line_key as line, endpoint_path as endpoint, received_at,
      updated_at, body_bytes
    from requests where project_id = ${projectId} ${filter}`;
  return withAttempts(ctx, rows);
}

async function withAttempts(
  ctx: Ctx,
  requests: Omit<RequestView, "attempts">[],
): Promise<RequestView[]> {
  if (requests.length === 0) return [];
  const attempts = await ctx.sql<(AttemptView & { requestId: string })[]>`
    select request_id, target_id, target_name, attempt, started_at, status_code, latency_ms, error
    from attempts where request_id in ${ctx.sql(requests.map((r) => r.requestId))}
    order by id`;
  return requests.map((request) => ({
    ...request,
    attempts: attempts
      .filter((a) => a.requestId === request.requestId)
      .map(({ requestId: _, ...attempt }) => attempt),
  }));
}
