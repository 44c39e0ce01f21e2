/**
 * What the management API answers, as zod schemas: the OpenAPI document's answer schemas
 * (control/openapi.ts), and through `route` (control/rest/contract.ts) a type check that each
 * operation returns their shape. The request log's are in ./request-answers.ts.
 */

import { z } from "zod";
import { type ErrorCode, errorStatus } from "../../core/errors.ts";
import { orderings } from "../../core/lanes.ts";
import { type ProjectCap, projectCaps } from "../../core/limits.ts";
import { deliveryModes, keyModes, plans, roles } from "../../core/model.ts";
import { policyBody } from "./projects.ts";
import { attempt, body, recovery, recoveryPlan, request, requestPage } from "./request-answers.ts";
import { timestamp } from "./timestamp.ts";
import { transformCall } from "./transforms.ts";
import { jsonObject, jsonValue } from "./validation.ts";

const errorCodes = Object.keys(errorStatus) as [ErrorCode, ...ErrorCode[]];

/** Every refusal, from the edge and the management API alike (core/errors.ts `toBody`). */
export const errorBody = z.strictObject({
  error: z.strictObject({
    code: z.enum(errorCodes),
    message: z.string(),
    /** One entry per offending field of an invalid input. */
    details: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional(),
  }),
});

const project = z.strictObject({
  slug: z.string(),
  name: z.string(),
  plan: z.enum(plans),
  createdAt: timestamp,
});

export const projectDetail = project.extend({
  inboundUrl: z
    .string()
    .describe("`{scheme}://{slug}.{edge domain}`: an endpoint is `{inboundUrl}/{line}/{endpoint}`"),
  workflowsUrl: z
    .string()
    .describe(
      'The Temporal UI\'s workflow list; a request\'s workflows (its own, and the batch that made its first attempt under load) are `{workflowsUrl}?query=` with `WorkflowId="{requestId}" OR RelayRequestIds="{requestId}"` URL-encoded. Empty for a member unless the deployment declares its Temporal UI member-safe (RELAY_TEMPORAL_UI_MEMBER_SAFE)',
    ),
  deliveryWarning: z
    .string()
    .describe("Why queued deliveries are not being taken (no worker); empty while they are"),
});

const member = z.strictObject({
  id: z.string(),
  name: z.string(),
  role: z.enum(roles),
  createdAt: timestamp,
  expiresAt: timestamp.nullable().describe("When the token stops working; null: never"),
});

export const createdProject = z.strictObject({
  project,
  owner: member,
  ownerToken: z.string().describe("The owner's member token, shown this once"),
});

export const projectList = z.strictObject({
  projects: z.array(
    z.strictObject({
      project,
      role: z.enum(roles),
      memberName: z.string().describe("Empty for the admin token"),
      memberId: z.string().describe("Empty for the admin token"),
    }),
  ),
  callerIsAdmin: z
    .boolean()
    .describe("True for the admin token, which manages every project; the panel refuses it"),
});

export const memberList = z.strictObject({ members: z.array(member) });

export const addedMember = z.strictObject({
  member,
  token: z.string().describe("The new member's token, shown this once"),
});

export const rotatedMemberToken = z.strictObject({
  member,
  token: z.string().describe("The member's new token, shown this once; the old one is refused"),
});

export const notifications = z.strictObject({ url: z.string(), createdAt: timestamp });

export const notificationsSet = notifications.extend({
  secret: z.string().optional().describe("The `whsec_...` secret, only in the answer that made it"),
});

export const notificationsRotated = notifications.extend({
  secret: z.string().describe("The new `whsec_...` secret, shown this once"),
});

export const line = z.strictObject({ key: z.string(), createdAt: timestamp });

export const lineList = z.strictObject({ lines: z.array(line) });

const target = z.strictObject({
  id: z.string(),
  name: z.string(),
  targetUrl: z.string(),
  deliveryMode: z.enum(deliveryModes),
  timeoutSeconds: z.number().int(),
  headers: z.record(z.string(), z.string()),
  maxDeliveriesPerSecond: z.number().int().optional().describe("Absent: no limit"),
  maxConcurrent: z.number().int().optional().describe("Absent: no limit"),
  secretHeaders: z
    .array(z.string())
    .optional()
    .describe("Lowercase; forwarded, never kept in the request log. Absent: none"),
  filter: jsonObject.optional().describe("Which calls it receives; absent: every call"),
  transform: z
    .string()
    .optional()
    .describe("The function `(request) => request` its calls go through; absent: none"),
  retry: z
    .strictObject({
      maxAttempts: z.number().int().optional(),
      initialIntervalSeconds: z.number().int().optional(),
      backoffCoefficient: z.number().optional(),
      maximumIntervalSeconds: z.number().int().optional(),
      windowSeconds: z.number().int().optional(),
    })
    .optional()
    .describe("Its own retry policy; absent, or a setting left out: the deployment's"),
});

const circuitBreaker = z.strictObject({
  failureThreshold: z.number().int(),
  windowSeconds: z.number().int(),
  disableAfterSeconds: z.number().int(),
});

export const endpoint = z.strictObject({
  line: z.string(),
  path: z.string(),
  targets: z.array(target),
  ipAllowlist: z.array(z.string()),
  schema: jsonObject.nullable(),
  rateLimit: z.strictObject({ requestsPerSecond: z.number(), burst: z.number().int() }).nullable(),
  circuitBreaker: circuitBreaker.nullable().optional().describe("Null: the defaults"),
  ordering: z
    .enum(orderings)
    .describe('"fifo": ordered per Relay-Ordering-Key and target (async deliveries)'),
  version: z.number().int(),
  updatedAt: timestamp,
});

export const createdEndpoint = endpoint.extend({
  signingSecret: z.string().describe("The endpoint's `whsec_...` signing secret, shown this once"),
});

export const endpointList = z.strictObject({ endpoints: z.array(endpoint) });

export const circuits = z.strictObject({
  targets: z.array(
    z.strictObject({
      targetId: z.string(),
      targetName: z.string(),
      state: z.enum(["closed", "open", "disabled"]),
      paused: z.boolean().describe("The target paused by hand"),
      endpointPaused: z.boolean().describe("Its whole endpoint paused by hand"),
      failures: z.number().int(),
      openedAt: timestamp.nullable(),
      waiting: z.number().int().describe("Deliveries waiting for the target"),
      events: z
        .array(
          z.strictObject({
            event: z.enum([
              "opened",
              "probe_failed",
              "recovered",
              "disabled",
              "enabled",
              "paused",
              "resumed",
            ]),
            at: timestamp,
          }),
        )
        .describe("The last ten, newest first"),
    }),
  ),
});

export const rotatedSigningSecret = z.strictObject({
  signingSecret: z.string().describe("The new `whsec_...` secret, shown this once"),
  previousExpiresAt: timestamp
    .nullable()
    .describe("When the previous secrets stop signing; null when there were none"),
});

const key = z.strictObject({
  id: z.string(),
  name: z.string(),
  mode: z.enum(keyModes),
  status: z.enum(["active", "expired_grace", "expired", "revoked"]),
  expiresAt: timestamp.nullable(),
  createdAt: timestamp,
  predecessorId: z.string().nullable(),
  successorId: z.string().nullable(),
});

export const issuedKey = z.strictObject({
  key,
  plaintext: z.string().describe("The key itself, shown this once"),
});

export const keyList = z.strictObject({ keys: z.array(key) });

export const revokedKey = z.strictObject({ key });

const pool = z.strictObject({
  used: z.number().int(),
  remaining: z.number().int().nullable().describe("Null when the pool is unmetered"),
  held: z
    .number()
    .int()
    .nullable()
    .describe(
      "Of remaining, what accepted calls not yet settled hold; a new call may use the rest. Null when the pool is unmetered",
    ),
});

export const usage = z.strictObject({
  plan: z.enum(plans),
  pools: z.strictObject({ live: pool, test: pool }),
});

const capUsage = z.strictObject({
  limit: z.number().int().describe("How far the project may grow"),
  used: z.number().int(),
});

/** Each per-project cap (core/limits.ts) and what the project uses of it. */
export const projectLimits = z.strictObject({
  ...(Object.fromEntries(projectCaps.map((cap) => [cap, capUsage])) as Record<
    ProjectCap,
    typeof capUsage
  >),
  rateLimit: z
    .strictObject({ requestsPerSecond: z.number(), burst: z.number().int() })
    .describe("Calls per second over all the project's endpoints: the plan's or the project's own"),
});

export const deliveryHistory = z.strictObject({
  hours: z.array(
    z.strictObject({
      hour: timestamp,
      delivered: z.number().int(),
      failedAttempts: z.number().int(),
    }),
  ),
});

export const clock = z.strictObject({
  now: timestamp,
  offsetMs: z.number().describe("How far the dev clock runs ahead of real time"),
});

export const rotationRun = z.strictObject({ rotated: z.number().int() });

export const schedule = z.strictObject({
  scheduleId: z.string(),
  endpoint: z.string().describe("The endpoint it calls, `{line}/{endpoint}`"),
  cron: z.string(),
  timeZone: z.string(),
  body: jsonValue.describe("The JSON body each fire sends; null: none"),
  headers: z.record(z.string(), z.string()),
  mode: z.enum(keyModes),
  paused: z.boolean(),
  note: z.string(),
  fires: z.number().int().describe("Fires sent so far"),
  lastFiredAt: timestamp.nullable(),
  lastStatus: z
    .number()
    .int()
    .nullable()
    .describe("What the edge answered the last fire (202: accepted; a sync target's own status)"),
  lastRequestId: z.string().nullable().describe("The last fire's request, in the request log"),
  nextFireAt: timestamp
    .nullable()
    .optional()
    .describe("When it fires next (on a read of one schedule); null: paused"),
  createdAt: timestamp,
  updatedAt: timestamp,
});

export const scheduleList = z.strictObject({
  schedules: z
    .array(schedule.omit({ body: true, headers: true, nextFireAt: true }))
    .describe("Without their calls' bodies and headers: read one schedule for those"),
});

/** Shapes the document names, as `#/components/schemas/{name}`. */
export const components: Record<string, z.ZodType> = {
  Timestamp: timestamp,
  JsonValue: jsonValue,
  Error: errorBody,
  Project: project,
  ProjectDetail: projectDetail,
  Member: member,
  Policy: policyBody,
  Notifications: notifications,
  Line: line,
  Target: target,
  CircuitBreaker: circuitBreaker,
  Endpoint: endpoint,
  Circuits: circuits,
  Key: key,
  IssuedKey: issuedKey,
  Usage: usage,
  ProjectLimits: projectLimits,
  Body: body,
  Attempt: attempt,
  Request: request,
  RequestPage: requestPage,
  Recovery: recovery,
  RecoveryPlan: recoveryPlan,
  TransformCall: transformCall,
  Schedule: schedule,
};
