/** Lines and endpoints with their targets. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { parseCidr } from "../../core/ip.ts";
import { deliveryModes, type Endpoint, type JsonValue } from "../../core/model.ts";
import { schemaProblem } from "../../core/schema.ts";
import { newId } from "../../core/secrets.ts";
import { type SavedTargetRules, targetUrlProblem } from "../../core/targets.ts";
import { recordChange } from "../../store/changes.ts";
import type { Queryable, Sql } from "../../store/db.ts";
import { addSigningSecret } from "../../store/signing.ts";
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

type EndpointSpec = z.infer<ReturnType<typeof endpointSpecSchema>>;

export interface LineView {
  key: string;
  createdAt: Date;
}

export async function listLines(ctx: Ctx, slug: string): Promise<LineView[]> {
  const access = await projectAccess(ctx, slug);
  return ctx.sql<LineView[]>`
    select key, created_at from lines where project_id = ${access.projectId} order by key`;
}

export async function createLine(ctx: Ctx, slug: string, input: unknown): Promise<LineView> {
  const access = await projectAccess(ctx, slug);
  const { key } = parseInput(z.strictObject({ key: segment }), input);
  const [line] = await ctx.sql<LineView[]>`
    insert into lines (project_id, key) values (${access.projectId}, ${key})
    returning key, created_at`.catch(conflictOnDuplicate(`a line '${key}' already exists`));
  return line as LineView;
}

export async function deleteLine(ctx: Ctx, slug: string, key: string): Promise<void> {
  const access = await projectAccess(ctx, slug);
  await ctx.sql.begin(async (tx) => {
    const deleted = await tx`
      delete from lines where project_id = ${access.projectId} and key = ${key}`;
    if (deleted.count === 0) throw new RelayError("not_found", `no line '${key}'`);
    await recordChange(tx, access.projectId, "routing");
  });
}

export async function listEndpoints(ctx: Ctx, slug: string, line: string): Promise<Endpoint[]> {
  const access = await projectAccess(ctx, slug);
  await requireLine(ctx.sql, access.projectId, line);
  return loadEndpoints(ctx.sql, access.projectId, { line });
}

export async function getEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<Endpoint> {
  const access = await projectAccess(ctx, slug);
  const [endpoint] = await loadEndpoints(ctx.sql, access.projectId, { line, path });
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
  const signingSecret = await ctx.sql
    .begin(async (tx) => {
      const endpointId = newId("ep");
      await tx`
        insert into endpoints (id, project_id, line_key, path, ip_allowlist, schema, rate_limit)
        values (${endpointId}, ${access.projectId}, ${line}, ${spec.path}, ${spec.ipAllowlist},
          ${jsonOrNull(tx, spec.schema)}, ${jsonOrNull(tx, spec.rateLimit)})`;
      await insertTargets(tx, endpointId, spec.targets, new Map());
      const secret = await addSigningSecret(tx, ctx.sealingKey, endpointId, ctx.now());
      await recordChange(tx, access.projectId, "routing");
      return secret;
    })
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
  await ctx.sql
    .begin(async (tx) => {
      const [endpoint] = await tx<{ id: string }[]>`
        update endpoints set path = ${spec.path}, ip_allowlist = ${spec.ipAllowlist},
          schema = ${jsonOrNull(tx, spec.schema)}, rate_limit = ${jsonOrNull(tx, spec.rateLimit)},
          version = version + 1, updated_at = now()
        where project_id = ${access.projectId} and line_key = ${line} and path = ${path}
        returning id`;
      if (!endpoint) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
      // Targets keep their id across edits when their name stays, so delivery ids stay stable.
      const previous = await tx<{ id: string; name: string }[]>`
        delete from targets where endpoint_id = ${endpoint.id} returning id, name`;
      await insertTargets(
        tx,
        endpoint.id,
        spec.targets,
        new Map(previous.map((t) => [t.name, t.id])),
      );
      await recordChange(tx, access.projectId, "routing");
    })
    .catch(conflictOnDuplicate(`an endpoint '${line}/${spec.path}' already exists`));
  return getEndpoint(ctx, slug, line, spec.path);
}

export async function deleteEndpoint(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<void> {
  const access = await projectAccess(ctx, slug);
  await ctx.sql.begin(async (tx) => {
    const deleted = await tx`
      delete from endpoints
      where project_id = ${access.projectId} and line_key = ${line} and path = ${path}`;
    if (deleted.count === 0) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
    await recordChange(tx, access.projectId, "routing");
  });
}

/** Endpoints with their targets in one query; the edge's project state uses it too. */
export async function loadEndpoints(
  sql: Sql,
  projectId: string,
  where: { line?: string; path?: string } = {},
): Promise<Endpoint[]> {
  const rows = await sql<(Omit<Endpoint, "line"> & { lineKey: string })[]>`
    select e.line_key, e.path, e.ip_allowlist, e.schema, e.rate_limit, e.version, e.updated_at,
      coalesce((select json_agg(json_build_object(
          'id', t.id, 'name', t.name, 'targetUrl', t.target_url, 'deliveryMode', t.delivery_mode,
          'timeoutSeconds', t.timeout_seconds, 'headers', t.headers) order by t.position)
        from targets t where t.endpoint_id = e.id), '[]') as targets
    from endpoints e
    where e.project_id = ${projectId}
      ${where.line === undefined ? sql`` : sql`and e.line_key = ${where.line}`}
      ${where.path === undefined ? sql`` : sql`and e.path = ${where.path}`}
    order by e.line_key, e.path`;
  return rows.map(({ lineKey, ...endpoint }) => ({ line: lineKey, ...endpoint }));
}

async function requireLine(sql: Sql, projectId: string, line: string): Promise<void> {
  const [found] = await sql`select 1 from lines where project_id = ${projectId} and key = ${line}`;
  if (!found) throw new RelayError("not_found", `no line '${line}'`);
}

async function insertTargets(
  sql: Queryable,
  endpointId: string,
  targets: EndpointSpec["targets"],
  idsByName: Map<string, string>,
): Promise<void> {
  for (const [position, t] of targets.entries()) {
    await sql`
      insert into targets (id, endpoint_id, position, name, target_url, delivery_mode,
        timeout_seconds, headers)
      values (${idsByName.get(t.name) ?? newId("tgt")}, ${endpointId}, ${position}, ${t.name},
        ${t.targetUrl}, ${t.deliveryMode}, ${t.timeoutSeconds}, ${sql.json(t.headers)})`;
  }
}

function jsonOrNull(sql: Queryable, value: JsonValue) {
  return value === null ? null : sql.json(value);
}
