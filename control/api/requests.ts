/** The request log: every request and each target's attempts. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { type RequestStatus, requestStatuses } from "../../core/model.ts";
import * as requestLog from "../../store/request-log.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

export type { AttemptView, RequestView } from "../../store/request-log.ts";

/** Which requests a list or a bulk replay covers. */
export const requestFilter = {
  status: z.enum(requestStatuses).optional(),
  /** "{line}/{endpoint}" */
  endpoint: z
    .string()
    .regex(/^[^/]+\/[^/]+$/, "must be '{line}/{endpoint}'")
    .optional(),
};

export const listRequestsQuery = z.object({
  ...requestFilter,
  cursor: z.string().optional(),
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
  const { status, endpoint, cursor, limit } = parseInput(listRequestsQuery, query);
  const [line, path] = endpoint?.split("/") ?? [];
  const statuses = status === undefined ? within : within.filter((s) => s === status);
  const rows = await requestLog.listRequests(ctx.sql, access.projectId, {
    statuses,
    endpoint: line === undefined ? undefined : { line, path: path ?? "" },
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
  const access = await projectAccess(ctx, slug);
  const request = await requestLog.findRequest(ctx.sql, access.projectId, requestId);
  if (!request) throw new RelayError("not_found", `no request '${requestId}'`);
  return request;
}
