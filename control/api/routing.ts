/** Lines and endpoints with their targets. */

import { z } from "zod";
import { circuitBreakerBounds, defaultCircuitBreaker } from "../../core/circuit.ts";
import { RelayError } from "../../core/errors.ts";
import { parseCidr } from "../../core/ip.ts";
import { deliveryModes, type Endpoint } from "../../core/model.ts";
import { schemaProblem } from "../../core/schema.ts";
import { type SavedTargetRules, targetUrlProblem } from "../../core/targets.ts";
import type { Sql } from "../../store/db.ts";
import type { LineView } from "../../store/routing.ts";
import * as routing from "../../store/routing.ts";
import { type Ctx, conflictOnDuplicate, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

/** A path segment: the line key or the endpoint path of an inbound URL. */
const segment = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be 1-64 of A-Z a-z 0-9 . _ - (one segment)");

/** Headers Relay sets itself or that belong to the connection, not to a target's config. */
const RESERVED_HEADER =
  /^(host|content-length|content-type|connection|transfer-encoding|te|upgrade|keep-alive|x-relay-.*|webhook-(id|timestamp|signature))$/i;

const targetSchema = (rules: SavedTargetRules) =>
  z.strictObject({
    name: z.string().trim().min(1).max(200),
    targetUrl: z.string().superRefine((url, issues) => {
      const problem = targetUrlProblem(url, rules);
      if (problem) issues.addIssue({ code: "custom", message: problem });
    }),
    deliveryMode: z.enum(deliveryModes).default("async"),
    timeoutSeconds: z.number().int().min(1).max(90).default(30),
    headers: z
      .record(
        z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "must be a header name"),
        z.string().max(8192),
      )
      .default({})
      .refine((h) => Object.keys(h).every((name) => !RESERVED_HEADER.test(name)), {
        message:
          "may not set Host, Content-*, hop-by-hop, X-Relay-* or webhook-* signature headers",
      }),
  });

/** A circuit breaker setting: a whole number in its bounds, the default when absent. */
const bounded = (name: keyof typeof circuitBreakerBounds) =>
  z
    .number()
    .int()
    .min(circuitBreakerBounds[name].min)
    .max(circuitBreakerBounds[name].max)
    .default(defaultCircuitBreaker[name]);

/** An endpoint as saved; where its targets may point depends on the deployment's rules. */
const endpointSpecSchema = (rules: SavedTargetRules) =>
  z
    .strictObject({
      path: segment,
      targets: z.array(targetSchema(rules)).min(1).max(50),
      ipAllowlist: z
        .array(z.string().refine((c) => parseCidr(c) !== null, "must be an IPv4 or IPv6 CIDR"))
        .max(500)
        .default([]),
      schema: z.record(z.string(), z.json()).nullable().default(null),
      rateLimit: z
        .strictObject({
          requestsPerSecond: z.number().positive().max(1_000_000),
          burst: z.number().int().min(1).max(10_000_000),
        })
        .nullable()
        .default(null),
      circuitBreaker: z
        .strictObject({
          failureThreshold: bounded("failureThreshold"),
          windowSeconds: bounded("windowSeconds"),
          disableAfterSeconds: bounded("disableAfterSeconds"),
        })
        .nullable()
        .default(null),
    })
    .superRefine((spec, issues) => {
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
    });

export type { LineView } from "../../store/routing.ts";

export async function listLines(ctx: Ctx, slug: string): Promise<LineView[]> {
  const access = await projectAccess(ctx, slug);
  return routing.listLines(ctx.sql, access.projectId);
}

export async function createLine(ctx: Ctx, slug: string, input: unknown): Promise<LineView> {
  const access = await projectAccess(ctx, slug);
  const { key } = parseInput(z.strictObject({ key: segment }), input);
  return routing
    .insertLine(ctx.sql, access.projectId, key)
    .catch(conflictOnDuplicate(`a line '${key}' already exists`));
}

export async function deleteLine(ctx: Ctx, slug: string, key: string): Promise<void> {
  const access = await projectAccess(ctx, slug);
  const deleted = await routing.deleteLine(ctx.sql, access.projectId, key);
  if (!deleted) throw new RelayError("not_found", `no line '${key}'`);
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
  const spec = parseInput(endpointSpecSchema(ctx.targetRules), input);
  await requireLine(ctx.sql, access.projectId, line);
  const signingSecret = await routing
    .insertEndpoint(ctx.sql, ctx.sealingKey, ctx.now(), access.projectId, line, spec)
    .catch(conflictOnDuplicate(`an endpoint '${line}/${spec.path}' already exists`));
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
  const spec = parseInput(endpointSpecSchema(ctx.targetRules), { path, ...(input as object) });
  const replaced = await routing
    .replaceEndpoint(ctx.sql, access.projectId, line, path, spec)
    .catch(conflictOnDuplicate(`an endpoint '${line}/${spec.path}' already exists`));
  if (!replaced) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  return getEndpoint(ctx, slug, line, spec.path);
}

export async function deleteEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<void> {
  const access = await projectAccess(ctx, slug);
  const deleted = await routing.deleteEndpoint(ctx.sql, access.projectId, line, path);
  if (!deleted) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
}

async function requireLine(sql: Sql, projectId: string, line: string): Promise<void> {
  if (!(await routing.lineExists(sql, projectId, line)))
    throw new RelayError("not_found", `no line '${line}'`);
}
