/**
 * What the request log's operations answer (control/api/requests.ts, replay, send-again, erase):
 * a request with its attempts, a page of them, a recovery job (a replay in bulk). Part of the answer schemas
 * of ./answers.ts, which names them in the document's components.
 */
import { z } from "zod";
import { bodyEncodings } from "../../core/inspect.ts";
import { requestStatuses } from "../../core/model.ts";
import { recoveryStates } from "../../core/recoveries.ts";
import { TRACE_ID } from "../../core/tracing.ts";
import { timestamp } from "./timestamp.ts";

/** A body as the log keeps it: text when it is valid UTF-8, else base64 (core/inspect.ts). */
export const body = z
  .strictObject({
    encoding: z.enum(bodyEncodings),
    text: z.string().describe('The body itself ("utf8"), or its bytes in base64 ("base64")'),
    bytes: z.number().int().describe("Its size in bytes"),
  })
  .describe("A body: as text when it is valid UTF-8, else in base64");

const headers = z.record(z.string(), z.string()).describe("Header values by lowercase name");

export const attempt = z.strictObject({
  targetId: z.string(),
  targetName: z.string(),
  attempt: z.number().int(),
  startedAt: timestamp,
  statusCode: z.number().int().nullable(),
  latencyMs: z.number().nullable().describe("Null while the attempt is in flight"),
  error: z.string().nullable(),
  response: z
    .strictObject({
      headers,
      body: body.describe("The answer's first 64 KiB"),
      truncated: z.boolean().describe("The answer was longer than 64 KiB"),
    })
    .nullable()
    .optional()
    .describe(
      "What the target answered; null when it did not answer, or the attempt was logged before the log kept answers, or it was erased. Only in a single request's read",
    ),
});

export const request = z.strictObject({
  requestId: z.string(),
  status: z.enum(requestStatuses),
  line: z.string(),
  endpoint: z.string(),
  receivedAt: timestamp,
  notBefore: timestamp.nullable().describe("A delayed request's time"),
  traceId: z
    .string()
    .regex(TRACE_ID)
    .nullable()
    .describe(
      "The W3C trace of its spans (32 hex digits); null when its edge did not export traces",
    ),
  updatedAt: timestamp,
  bodyBytes: z.number().int(),
  idempotencyKey: z.string().nullable().describe("The caller's Idempotency-Key, when it sent one"),
  resentFrom: z
    .string()
    .nullable()
    .describe("The request this one was sent again from (`POST .../send-again`)"),
  contentErasedAt: timestamp
    .nullable()
    .describe(
      "When its headers, body and answers were erased (`DELETE .../content`, or the project's `retentionDays`); null while the log keeps them",
    ),
  headers: headers
    .nullable()
    .optional()
    .describe(
      "The inbound headers as forwarded to the targets (never Authorization, nor a header a target marks secret); null when the request was logged before the log kept them, or they were erased. Only in a single request's read",
    ),
  body: body
    .nullable()
    .optional()
    .describe(
      "The body as received; null when the request was logged before the log kept bodies, or it was erased. Only in a single request's read",
    ),
  attempts: z.array(attempt),
  callbacks: z
    .array(
      z.strictObject({
        targetId: z.string(),
        replay: z.number().int().describe("0 for the call itself, else the replay's number"),
        kind: z
          .enum(["delivered", "failed"])
          .describe("Which end: `Relay-Callback` (delivered) or `Relay-Failure-Callback` (failed)"),
        url: z.string(),
        tries: z.number().int(),
        statusCode: z.number().int().nullable().describe("The last try's answer; null: none"),
        error: z.string().nullable().describe("Why the last try failed, when it had no answer"),
        sent: z.boolean().describe("A try was answered 2xx: no more tries"),
        updatedAt: timestamp,
      }),
    )
    .optional()
    .describe(
      "Its completion callbacks (`Relay-Callback`, `Relay-Failure-Callback`), each's last try. Only in a single request's read",
    ),
  waiting: z.array(
    z.strictObject({
      targetId: z.string(),
      targetName: z.string(),
      reason: z
        .enum(["paused", "circuit_open", "disabled", "throttled"])
        .describe(
          "Why it waits: its target paused, its circuit open or disabled, or its flow limits full",
        ),
    }),
  ),
  skipped: z
    .array(
      z.strictObject({
        targetId: z.string(),
        targetName: z.string(),
        reason: z
          .enum(["filter", "transform"])
          .describe(
            "filter: the target's filter does not match the call; transform: its transformation returned null",
          ),
      }),
    )
    .describe("Targets the call was not delivered to (nor charged for), and why"),
});

export const requestPage = z.strictObject({
  requests: z.array(request),
  nextCursor: z.string().describe("The next page's `cursor`; empty on the last page"),
});

export const recoveryPlan = z.strictObject({
  matched: z.number().int().describe("Requests the job would replay"),
  credits: z.number().int().describe("The credits their replays would hold and be charged"),
});

export const recovery = z.strictObject({
  recoveryId: z.string(),
  state: z.enum(recoveryStates).describe("failed: the project's credits ran out (see `error`)"),
  filter: z
    .strictObject({
      statuses: z.array(z.enum(requestStatuses)),
      endpoint: z.string().optional(),
      target: z.string().optional(),
      since: z.string().optional(),
      until: z.string().optional(),
      requestId: z.string().optional(),
      idempotencyKey: z.string().optional(),
      targetStatus: z.number().int().optional(),
    })
    .describe("What it replays: the body's filter, `until` at most the job's start"),
  error: z.string().nullable(),
  matched: z.number().int().describe("Requests that matched when it started"),
  credits: z.number().int().describe("What the dry run said their replays would cost"),
  sent: z.number().int().describe("Replays that delivered"),
  failed: z.number().int().describe("Replays that ended without delivering"),
  skipped: z
    .number()
    .int()
    .describe("Matches that did not replay: not finished by then, erased, their targets gone"),
  running: z.number().int().describe("Replays under way"),
  createdAt: timestamp,
  updatedAt: timestamp.describe("Its last step: at least every 2 s while it runs"),
  finishedAt: timestamp.nullable().describe("When its last replay ended"),
});

export const recoveryList = z.strictObject({ recoveries: z.array(recovery) });

export const retention = z.strictObject({
  retentionDays: z
    .number()
    .int()
    .nullable()
    .describe(
      "Days its requests' headers, bodies and answers are kept; null: as long as the log keeps the request",
    ),
  maxRetentionDays: z.number().int().describe("The most the project's plan allows"),
});
