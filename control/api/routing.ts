/** Lines and endpoints with their targets. */

import { z } from "zod";
import { circuitBreakerBounds, defaultCircuitBreaker } from "../../core/circuit.ts";
import { RelayError } from "../../core/errors.ts";
import { filterProblems } from "../../core/filter-rules.ts";
import { parseCidr } from "../../core/ip.ts";
import { orderings } from "../../core/lanes.ts";
import {
  deliveryModes,
  type Endpoint,
  type JsonObject,
  type Plan,
  type TargetRetry,
} from "../../core/model.ts";
import { retryBounds, retryProblems } from "../../core/retry.ts";
import { schemaProblem } from "../../core/schema.ts";
import type { SavedTargetRules } from "../../core/targets.ts";
import { transformSizeProblem } from "../../core/transform.ts";
import { waitForEdgesToCatchUp } from "../../store/changes.ts";
import type { Sql } from "../../store/db.ts";
import type { LineView } from "../../store/routing.ts";
import * as routing from "../../store/routing.ts";
import { scheduleIdsOf } from "../../store/schedules.ts";
import { type Ctx, conflictOnDuplicate, projectAccess } from "./context.ts";
import { capsOf } from "./limits.ts";
import { forgetSchedules } from "./schedules.ts";
import {
  allowedUrls,
  displayName,
  headerName,
  headerValue,
  jsonObject,
  parseInput,
  postedUrl,
  rateLimitBody,
} from "./validation.ts";

/** A path segment: the line key or the endpoint path of an inbound URL. */
const segment = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be 1-64 of A-Z a-z 0-9 . _ - (one segment)");

/** Headers Relay sets itself or that belong to the connection, not to a target's config. */
const RESERVED_HEADER =
  /^(host|content-length|content-type|connection|transfer-encoding|te|upgrade|keep-alive|x-relay-.*|webhook-(id|timestamp|signature))$/i;

/**
 * A retry setting within what any plan allows (a free project's tighter bounds are checked when
 * saved, `retryPlanRules`); absent, the deployment's.
 */
const retrySetting = (name: keyof TargetRetry, what: string, whole = true) => {
  const { min, max } = retryBounds.paid[name];
  const number = whole ? z.number().int() : z.number();
  return number.min(min).max(max).optional().describe(`${what}; ${min} to ${max}`);
};

/** A flow control limit: a whole number 1 to 1000; absent or null, no limit. */
const flowLimit = (what: string) =>
  z
    .number()
    .int()
    .min(1)
    .max(1000)
    .nullish()
    .transform((limit) => limit ?? undefined)
    .describe(`${what}, 1 to 1000 (async targets only); absent or null: no limit`);

const targetSchema = z.strictObject({
  name: displayName,
  targetUrl: postedUrl,
  deliveryMode: z.enum(deliveryModes).default("async"),
  timeoutSeconds: z.number().int().min(1).max(90).default(30),
  maxDeliveriesPerSecond: flowLimit("Deliveries started per second"),
  maxConcurrent: flowLimit("Attempts in flight at once"),
  secretHeaders: z
    .array(headerName.max(100))
    .max(32)
    .default([])
    .transform((names) =>
      [...new Set(names.map((n) => n.toLowerCase()))].filter((n) => n !== "authorization"),
    )
    .describe(
      "Inbound headers forwarded to this target but never kept in the request log: kept lowercase and once each, `authorization` left out (never kept anyway)",
    ),
  headers: z
    .record(headerName, headerValue)
    .default({})
    .refine((h) => Object.keys(h).every((name) => !RESERVED_HEADER.test(name)), {
      message: "may not set Host, Content-*, hop-by-hop, X-Relay-* or webhook-* signature headers",
    }),
  retry: z
    .strictObject({
      maxAttempts: retrySetting("maxAttempts", "Attempts in all, the first included"),
      initialIntervalSeconds: retrySetting("initialIntervalSeconds", "The first retry's wait"),
      backoffCoefficient: retrySetting("backoffCoefficient", "Each wait's growth", false),
      maximumIntervalSeconds: retrySetting("maximumIntervalSeconds", "The longest wait"),
      windowSeconds: retrySetting("windowSeconds", "How long after the call it is retried"),
    })
    .nullish()
    .transform((retry) => (retry && Object.keys(retry).length > 0 ? retry : undefined))
    .describe(
      "Its own retry policy (async targets); a setting left out, or the whole of it, is the deployment's. Bounds per plan: docs/api.md",
    ),
  transform: z
    .string()
    .nullish()
    .superRefine((source, issues) => {
      const problem = source ? transformSizeProblem(source) : null;
      if (problem) issues.addIssue({ code: "custom", message: problem });
    })
    .transform((source) => (source && source.trim() !== "" ? source : undefined))
    .describe(
      'A JavaScript function `(request) => request` each call to this target goes through, sandboxed (50 ms, 64 MiB): it may change the body, headers, path and query sent, or return null to drop the call (skipped, not charged). At most 32 KiB. Absent, null or empty: none. docs/api.md "Transformations"',
    ),
  filter: z
    .unknown()
    .optional()
    .superRefine((filter, issues) => {
      if (filter === undefined || filter === null) return;
      // Each problem's place inside the filter leads its message; the issue's path is the field.
      for (const { path, message } of filterProblems(filter, "")) {
        issues.addIssue({
          code: "custom",
          message: path ? `${path.slice(1)}: ${message}` : message,
        });
      }
    })
    .transform((filter) =>
      filter && Object.keys(filter).length > 0 ? (filter as JsonObject) : undefined,
    )
    .meta({ type: "object" })
    .describe(
      "Which calls this target receives: Hookdeck Outpost's filter syntax over the call's `body` and `headers` (lowercase names); a call it does not match is skipped, not delivered and not charged. Absent, null or {}: every call",
    ),
});

/**
 * An IP allowlist entry: an IPv4 or IPv6 address or CIDR, as zod's patterns have them (the
 * document states them, so a client knows before it calls) and as parseCidr, which the edge
 * matches with, reads them. One refinement, not a union: a union's failure would stop the body's
 * own checks (its target URLs), and the panel shows every field's refusal at once.
 */
const ADDRESS_PATTERNS = [z.regexes.ipv4, z.regexes.ipv6, z.regexes.cidrv4, z.regexes.cidrv6];
const allowlistEntry = z
  .string()
  .refine(
    (entry) => ADDRESS_PATTERNS.some((p) => p.test(entry)) && parseCidr(entry) !== null,
    "must be an IPv4 or IPv6 CIDR",
  )
  .meta({ anyOf: ADDRESS_PATTERNS.map((p) => ({ pattern: p.source })) });

/** A circuit breaker setting: a whole number in its bounds, the default when absent. */
const bounded = (name: keyof typeof circuitBreakerBounds) =>
  z
    .number()
    .int()
    .min(circuitBreakerBounds[name].min)
    .max(circuitBreakerBounds[name].max)
    .default(defaultCircuitBreaker[name]);

/** An endpoint's settings but its path: the body of a create, with its path, and of an update. */
const endpointSettings = {
  targets: z.array(targetSchema).min(1).max(50),
  ipAllowlist: z.array(allowlistEntry).max(500).default([]),
  schema: jsonObject.nullable().default(null),
  rateLimit: rateLimitBody.nullable().default(null),
  circuitBreaker: z
    .strictObject({
      failureThreshold: bounded("failureThreshold"),
      windowSeconds: bounded("windowSeconds"),
      disableAfterSeconds: bounded("disableAfterSeconds"),
    })
    .nullable()
    .default(null),
  ordering: z
    .enum(orderings)
    .default("none")
    .describe(
      '"fifo": async deliveries with the same Relay-Ordering-Key (or all without one) reach each target in accept order, one at a time',
    ),
};

/** The rules across an endpoint's fields. */
function endpointRules(
  spec: { targets: z.output<typeof targetSchema>[]; schema: JsonObject | null },
  issues: z.RefinementCtx,
): void {
  for (const [i, target] of spec.targets.entries()) {
    if (target.deliveryMode === "async") continue;
    for (const limit of ["maxDeliveriesPerSecond", "maxConcurrent", "retry"] as const) {
      if (target[limit] === undefined) continue;
      issues.addIssue({
        code: "custom",
        path: ["targets", i, limit],
        message: `only an async target takes flow control and retries; a ${target.deliveryMode} target answers its caller at once`,
      });
    }
  }
  const answering = spec.targets.filter((t) => t.deliveryMode !== "async");
  if (answering.length > 1) {
    issues.addIssue({
      code: "custom",
      path: ["targets"],
      message: "at most one target per endpoint may be sync or stream; the others are async",
    });
  }
  const problem = spec.schema ? schemaProblem(spec.schema) : null;
  if (problem) {
    issues.addIssue({
      code: "custom",
      path: ["schema"],
      message: `not a usable JSON Schema: ${problem}`,
    });
  }
  const names = new Set(spec.targets.map((t) => t.name));
  if (names.size !== spec.targets.length) {
    issues.addIssue({ code: "custom", path: ["targets"], message: "target names must differ" });
  }
}

export const createEndpointBody = z
  .strictObject({ path: segment, ...endpointSettings })
  .superRefine(endpointRules);

/** An update replaces every setting; a `path` renames the endpoint. */
export const updateEndpointBody = z
  .strictObject({ path: segment.optional(), ...endpointSettings })
  .superRefine(endpointRules);

/** Where this deployment lets the targets point. */
const allowedTargets = (rules: SavedTargetRules) =>
  allowedUrls(rules, (spec: { targets: { targetUrl: string }[] }) =>
    spec.targets.map((t, i) => [["targets", i, "targetUrl"], t.targetUrl]),
  );

/** A project's targets retry within its plan's bounds (core/retry.ts). */
const retryPlanRules =
  (plan: Plan) =>
  (spec: { targets: { retry?: TargetRetry | undefined }[] }, issues: z.RefinementCtx) => {
    for (const [i, { retry }] of spec.targets.entries()) {
      for (const { path, message } of retry ? retryProblems(retry, plan) : []) {
        issues.addIssue({ code: "custom", path: ["targets", i, "retry", path], message });
      }
    }
  };

/** Each target's transformation compiles to a function, in the sandbox; else 400 with details. */
async function transformsCompile(
  ctx: Ctx,
  slug: string,
  targets: { transform?: string | undefined }[],
): Promise<void> {
  const problems = await Promise.all(
    targets.map(({ transform }) => (transform ? ctx.transforms.check(slug, transform) : null)),
  );
  const details = problems.flatMap((message, i) =>
    message ? [{ path: `targets.${i}.transform`, message }] : [],
  );
  const [first] = details;
  if (first) throw new RelayError("bad_request", `${first.path}: ${first.message}`, details);
}

export const createLineBody = z.strictObject({ key: segment });

export type { LineView } from "../../store/routing.ts";

export async function listLines(ctx: Ctx, slug: string): Promise<LineView[]> {
  const access = await projectAccess(ctx, slug);
  return routing.listLines(ctx.sql, access.projectId);
}

export async function createLine(ctx: Ctx, slug: string, input: unknown): Promise<LineView> {
  const access = await projectAccess(ctx, slug);
  const { key } = parseInput(createLineBody, input);
  const line = await routing
    .insertLine(ctx.sql, capsOf(ctx), access.projectId, key)
    .catch(conflictOnDuplicate(`a line '${key}' already exists`));
  await waitForEdgesToCatchUp(ctx.sql);
  return line;
}

export async function deleteLine(ctx: Ctx, slug: string, key: string): Promise<void> {
  const access = await projectAccess(ctx, slug);
  const scheduled = await scheduleIdsOf(ctx.sql, access.projectId, { line: key });
  const deleted = await routing.deleteLine(ctx.sql, access.projectId, key);
  if (!deleted) throw new RelayError("not_found", `no line '${key}'`);
  await waitForEdgesToCatchUp(ctx.sql);
  await forgetSchedules(ctx, scheduled);
}

export async function listEndpoints(ctx: Ctx, slug: string, line: string): Promise<Endpoint[]> {
  const access = await projectAccess(ctx, slug);
  await requireLine(ctx.sql, access.projectId, line);
  return routing.loadEndpoints(ctx.sql, access.projectId, { line });
}

export async function getEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<Endpoint> {
  const access = await projectAccess(ctx, slug);
  const [endpoint] = await routing.loadEndpoints(ctx.sql, access.projectId, { line, path });
  if (!endpoint) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  return endpoint;
}

export async function createEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  input: unknown,
): Promise<Endpoint & { signingSecret: string }> {
  const access = await projectAccess(ctx, slug);
  const spec = parseInput(
    createEndpointBody
      .superRefine(allowedTargets(ctx.targetRules))
      .superRefine(retryPlanRules(access.plan)),
    input,
  );
  await transformsCompile(ctx, access.slug, spec.targets);
  await requireLine(ctx.sql, access.projectId, line);
  const signingSecret = await routing
    .insertEndpoint(ctx.sql, ctx.sealingKey, capsOf(ctx), access.projectId, line, spec)
    .catch(conflictOnDuplicate(`an endpoint '${line}/${spec.path}' already exists`));
  await waitForEdgesToCatchUp(ctx.sql);
  // The signing secret is in this answer only; no read shows it again.
  return { ...(await getEndpoint(ctx, slug, line, spec.path)), signingSecret };
}

export async function updateEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
  input: unknown,
): Promise<Endpoint> {
  const access = await projectAccess(ctx, slug);
  const update = parseInput(
    updateEndpointBody
      .superRefine(allowedTargets(ctx.targetRules))
      .superRefine(retryPlanRules(access.plan)),
    input,
  );
  await transformsCompile(ctx, access.slug, update.targets);
  const spec = { ...update, path: update.path ?? path };
  const replaced = await routing
    .replaceEndpoint(ctx.sql, capsOf(ctx), access.projectId, line, path, spec)
    .catch(conflictOnDuplicate(`an endpoint '${line}/${spec.path}' already exists`));
  if (!replaced) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  await waitForEdgesToCatchUp(ctx.sql);
  return getEndpoint(ctx, slug, line, spec.path);
}

export async function deleteEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<void> {
  const access = await projectAccess(ctx, slug);
  const scheduled = await scheduleIdsOf(ctx.sql, access.projectId, { line, path });
  const deleted = await routing.deleteEndpoint(ctx.sql, access.projectId, line, path);
  if (!deleted) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  await waitForEdgesToCatchUp(ctx.sql);
  await forgetSchedules(ctx, scheduled);
}

async function requireLine(sql: Sql, projectId: string, line: string): Promise<void> {
  if (!(await routing.lineExists(sql, projectId, line)))
    throw new RelayError("not_found", `no line '${line}'`);
}
