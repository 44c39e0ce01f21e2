/**
 * What a completion callback tells (core/callbacks.ts), read from the request log: how one
 * target's delivery ended in one run, with its last attempt's answer.
 */
import { type LoggedBody, loggedBody } from "../core/inspect.ts";
import type { KeyMode } from "../core/model.ts";
import type { Sql } from "./db.ts";
import { delivered } from "./request-log.ts";

/** How a target's delivery ended in one run, as a callback tells it. */
export interface DeliveryEnd {
  requestId: string;
  line: string;
  endpoint: string;
  target: { id: string; name: string };
  status: "delivered" | "failed";
  /** Attempts made in this run (the call's, or a replay's). */
  attempts: number;
  /** The last attempt's answer; null when the target never answered. */
  response: {
    status: number;
    headers: Record<string, string>;
    /** Its first 64 KiB. */
    body: LoggedBody;
    truncated: boolean;
  } | null;
}

interface EndRow {
  line: string;
  endpoint: string;
  keyMode: KeyMode;
  targetName: string;
  statusCode: number | null;
  responseHeaders: Record<string, string> | null;
  responseBody: Buffer | null;
  responseTruncated: boolean;
  attempts: string;
  delivered: boolean;
}

/**
 * How `targetId`'s delivery of `requestId` ended in run `replay` (0: the call's), and the pool it
 * was billed to; undefined when that run made no attempt there.
 */
export async function deliveryEnd(
  sql: Sql,
  requestId: string,
  targetId: string,
  replay: number,
): Promise<(DeliveryEnd & { keyMode: KeyMode }) | undefined> {
  const [row] = await sql<EndRow[]>`
    select r.line_key as line, r.endpoint_path as endpoint, r.key_mode, a.target_name,
      a.status_code, a.response_headers, a.response_body, a.response_truncated,
      count(*) over () as attempts, bool_or(${delivered(sql)}) over () as delivered
    from attempts a join requests r on r.id = a.request_id
    where a.request_id = ${requestId} and a.target_id = ${targetId} and a.replay = ${replay}
    order by a.id desc
    limit 1`;
  if (!row) return undefined;
  return {
    requestId,
    line: row.line,
    endpoint: row.endpoint,
    keyMode: row.keyMode,
    target: { id: targetId, name: row.targetName },
    status: row.delivered ? "delivered" : "failed",
    attempts: Number(row.attempts),
    response:
      row.statusCode === null
        ? null
        : {
            status: row.statusCode,
            headers: row.responseHeaders ?? {},
            body: loggedBody(row.responseBody ?? new Uint8Array()),
            truncated: row.responseTruncated,
          },
  };
}
