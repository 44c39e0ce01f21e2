/**
 * What a completion callback tells (core/callbacks.ts), read from the request log: how one
 * target's delivery ended in one run, with its last attempt's answer.
 */
import { type LoggedBody, loggedBody } from "../core/inspect.ts";
import type { KeyMode } from "../core/model.ts";
import type { Queryable, Sql } from "./db.ts";
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

/** A target's callback in one run as the log shows it: its last try's outcome. */
export interface CallbackView {
  targetId: string;
  replay: number;
  kind: "delivered" | "failed";
  url: string;
  tries: number;
  statusCode: number | null;
  error: string | null;
  /** A try was answered 2xx: no more tries. */
  sent: boolean;
  updatedAt: Date;
}

/** Logs a try of a callback: its answer's status, or why it had none. */
export async function logCallbackTry(
  q: Queryable,
  callback: Omit<CallbackView, "tries" | "sent" | "updatedAt"> & { requestId: string },
  at: Date,
): Promise<void> {
  const { requestId, targetId, replay, kind, url, statusCode, error } = callback;
  const sent = statusCode !== null && statusCode >= 200 && statusCode < 300;
  await q`
    insert into callbacks (request_id, target_id, replay, kind, url, tries, status_code, error,
      sent, updated_at)
    values (${requestId}, ${targetId}, ${replay}, ${kind}, ${url}, 1, ${statusCode}, ${error},
      ${sent}, ${at})
    on conflict (request_id, target_id, replay) do update set
      tries = callbacks.tries + 1, status_code = excluded.status_code, error = excluded.error,
      sent = callbacks.sent or excluded.sent, updated_at = excluded.updated_at`;
}

/** The callbacks of these requests, in order of their targets' ids and runs. */
export function callbacksOf(sql: Sql, requestIds: string[]) {
  return sql<(CallbackView & { requestId: string })[]>`
    select request_id, target_id, replay, kind, url, tries, status_code, error, sent, updated_at
    from callbacks where request_id in ${sql(requestIds)}
    order by request_id, replay, target_id`;
}
