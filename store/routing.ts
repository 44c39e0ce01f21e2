/**
 * A project's routing as stored: its lines, their endpoints and each endpoint's targets in order.
 * Every change goes on the change feed: a change to one endpoint as that endpoint's, so edges
 * refetch it alone; a line's deletion as the project's, so edges reload its whole state. Lines,
 * endpoints and their schemas' bytes are capped per project (store/limits.ts).
 */

import type { Ordering } from "../core/lanes.ts";
import type {
  CircuitBreaker,
  DeliveryTarget,
  Endpoint,
  JsonObject,
  RateLimit,
} from "../core/model.ts";
import { schemaBytes } from "../core/schema.ts";
import { newId } from "../core/secrets.ts";
import { recordChange, recordEndpointChange } from "./changes.ts";
import { forgetTargets } from "./circuits.ts";
import type { Queryable, Sql } from "./db.ts";
import { type Caps, claimRoom, endpointSchemaBytes } from "./limits.ts";
import { addSigningSecret } from "./signing.ts";

export interface LineView {
  key: string;
  createdAt: Date;
}

/** An endpoint as saved: what the stored row and its targets are built from. */
export interface EndpointSpec {
  path: string;
  targets: Omit<DeliveryTarget, "id">[];
  ipAllowlist: string[];
  schema: JsonObject | null;
  rateLimit: RateLimit | null;
  circuitBreaker: CircuitBreaker | null;
  ordering: Ordering;
}

export function listLines(sql: Sql, projectId: string): Promise<LineView[]> {
  return sql<LineView[]>`
    select key, created_at from lines where project_id = ${projectId} order by key`;
}

/** A taken key fails with a unique violation; one past the project's cap, `limit_exceeded`. */
export function insertLine(
  sql: Sql,
  caps: Caps,
  projectId: string,
  key: string,
): Promise<LineView> {
  return sql.begin(async (tx) => {
    await claimRoom(tx, projectId, caps, { lines: 1 });
    const [line] = await tx<LineView[]>`
      insert into lines (project_id, key) values (${projectId}, ${key})
      returning key, created_at`;
    return line as LineView;
  });
}

export async function lineExists(sql: Sql, projectId: string, key: string): Promise<boolean> {
  const [found] = await sql`select 1 from lines where project_id = ${projectId} and key = ${key}`;
  return found !== undefined;
}

/** Whether the project has a target of this id, on any of its endpoints. */
export async function targetExists(sql: Sql, projectId: string, targetId: string) {
  const [found] = await sql`
    select 1 from targets t join endpoints e on e.id = t.endpoint_id
    where e.project_id = ${projectId} and t.id = ${targetId}`;
  return found !== undefined;
}

/** Deletes the line with its endpoints; false when the project has no such line. */
export function deleteLine(sql: Sql, projectId: string, key: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const targets = await tx<{ id: string }[]>`
      select t.id from targets t join endpoints e on e.id = t.endpoint_id
      where e.project_id = ${projectId} and e.line_key = ${key}`;
    const deleted = await tx`delete from lines where project_id = ${projectId} and key = ${key}`;
    if (deleted.count === 0) return false;
    await forgetTargets(
      tx,
      targets.map((t) => t.id),
    );
    await recordChange(tx, projectId, "routing");
    return true;
  });
}

/**
 * The `targets` row in scope (`t`) as a DeliveryTarget: its flow limits, secret headers, retry
 * policy, transformation and filter absent when it has none (nulls stripped; the filter joins after the strip, as its own nulls,
 * `{"$eq": null}`, are conditions).
 */
export const deliveryTarget = (q: Queryable) => q`
  jsonb_strip_nulls(jsonb_build_object(
    'id', t.id, 'name', t.name, 'targetUrl', t.target_url, 'deliveryMode', t.delivery_mode,
    'timeoutSeconds', t.timeout_seconds, 'headers', t.headers,
    'maxDeliveriesPerSecond', t.max_deliveries_per_second, 'maxConcurrent', t.max_concurrent,
    'secretHeaders', nullif(t.secret_headers, '[]'), 'retry', t.retry, 'transform', t.transform))
    || case when t.filter is null then '{}' else jsonb_build_object('filter', t.filter) end`;

/**
 * Endpoints with their targets in one query: for the API's reads and the edge's project state.
 * A target's flow limits and secret headers are absent when it has none (nulls stripped).
 */
export async function loadEndpoints(
  sql: Sql,
  projectId: string,
  where: { line?: string; path?: string } = {},
): Promise<Endpoint[]> {
  const rows = await sql<(Omit<Endpoint, "line"> & { lineKey: string })[]>`
    select e.line_key, e.path, e.ip_allowlist, e.schema, e.rate_limit,
      e.circuit_breaker, e.ordering, e.version, e.updated_at,
      coalesce((select json_agg(${deliveryTarget(sql)} order by t.position)
        from targets t where t.endpoint_id = e.id), '[]') as targets
    from endpoints e
    where e.project_id = ${projectId}
      ${where.line === undefined ? sql`` : sql`and e.line_key = ${where.line}`}
      ${where.path === undefined ? sql`` : sql`and e.path = ${where.path}`}
    order by e.line_key, e.path`;
  return rows.map(({ lineKey, ...endpoint }) => ({ line: lineKey, ...endpoint }));
}

/** An endpoint's id and its targets' ids by name; undefined when there is no such endpoint. */
export async function endpointTargets(
  sql: Sql,
  projectId: string,
  line: string,
  path: string,
): Promise<{ endpointId: string; targets: Map<string, string> } | undefined> {
  const rows = await sql<{ endpointId: string; targetId: string | null; name: string | null }[]>`
    select e.id as endpoint_id, t.id as target_id, t.name
    from endpoints e left join targets t on t.endpoint_id = e.id
    where e.project_id = ${projectId} and e.line_key = ${line} and e.path = ${path}`;
  const [first] = rows;
  if (!first) return undefined;
  const targets = rows.flatMap((r) =>
    r.targetId && r.name ? [[r.name, r.targetId] as const] : [],
  );
  return { endpointId: first.endpointId, targets: new Map(targets) };
}

/**
 * A new endpoint on `line` with its targets and its first signing secret; answers the secret's
 * plaintext. A taken path fails with a unique violation; one past the project's caps (endpoints,
 * schema bytes), `limit_exceeded`.
 */
export function insertEndpoint(
  sql: Sql,
  sealingKey: CryptoKey,
  caps: Caps,
  projectId: string,
  line: string,
  spec: EndpointSpec,
): Promise<string> {
  return sql.begin(async (tx) => {
    const bytes = schemaBytesOf(spec);
    await claimRoom(tx, projectId, caps, { endpoints: 1, schemaBytes: bytes });
    const endpointId = newId("ep");
    await tx`
      insert into endpoints (id, project_id, line_key, path, ip_allowlist, schema, schema_bytes,
        rate_limit, circuit_breaker, ordering)
      values (${endpointId}, ${projectId}, ${line}, ${spec.path}, ${spec.ipAllowlist},
        ${jsonOrNull(tx, spec.schema)}, ${bytes}, ${jsonOrNull(tx, spec.rateLimit)},
        ${jsonOrNull(tx, spec.circuitBreaker)}, ${spec.ordering})`;
    await insertTargets(tx, endpointId, spec.targets, new Map());
    const secret = await addSigningSecret(tx, sealingKey, endpointId, caps.now);
    await recordEndpointChange(tx, projectId, line, spec.path);
    return secret;
  });
}

/**
 * Replaces the endpoint at `line/path` (its path may change) and its targets; false when there is
 * none. A path taken by another endpoint fails with a unique violation; a schema that grows the
 * project's past its cap, `limit_exceeded`.
 */
export function replaceEndpoint(
  sql: Sql,
  caps: Caps,
  projectId: string,
  line: string,
  path: string,
  spec: EndpointSpec,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const bytes = schemaBytesOf(spec);
    await claimRoom(tx, projectId, caps, async () => {
      const replaced = await endpointSchemaBytes(tx, projectId, line, path);
      return replaced === undefined ? {} : { schemaBytes: bytes - replaced };
    });
    const [endpoint] = await tx<{ id: string }[]>`
      update endpoints set path = ${spec.path}, ip_allowlist = ${spec.ipAllowlist},
        schema = ${jsonOrNull(tx, spec.schema)}, schema_bytes = ${bytes},
        rate_limit = ${jsonOrNull(tx, spec.rateLimit)},
        circuit_breaker = ${jsonOrNull(tx, spec.circuitBreaker)}, ordering = ${spec.ordering},
        version = version + 1, updated_at = now()
      where project_id = ${projectId} and line_key = ${line} and path = ${path}
      returning id`;
    if (!endpoint) return false;
    // Targets keep their id across edits when their name stays, so delivery ids stay stable.
    const previous = await tx<{ id: string; name: string }[]>`
      delete from targets where endpoint_id = ${endpoint.id} returning id, name`;
    await insertTargets(
      tx,
      endpoint.id,
      spec.targets,
      new Map(previous.map((t) => [t.name, t.id])),
    );
    const kept = new Set(spec.targets.map((t) => t.name));
    await forgetTargets(
      tx,
      previous.filter((t) => !kept.has(t.name)).map((t) => t.id),
    );
    // A rename is the old name's removal and the new name's creation, to an edge.
    await recordEndpointChange(tx, projectId, line, path);
    if (spec.path !== path) await recordEndpointChange(tx, projectId, line, spec.path);
    return true;
  });
}

/** Deletes the endpoint with its targets and secrets; false when there is none. */
export function deleteEndpoint(
  sql: Sql,
  projectId: string,
  line: string,
  path: string,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const deleted = await tx<{ id: string }[]>`
      delete from targets where endpoint_id in (
        select id from endpoints
        where project_id = ${projectId} and line_key = ${line} and path = ${path})
      returning id`;
    const endpoint = await tx`
      delete from endpoints
      where project_id = ${projectId} and line_key = ${line} and path = ${path}`;
    if (endpoint.count === 0) return false;
    await forgetTargets(
      tx,
      deleted.map((t) => t.id),
    );
    await recordEndpointChange(tx, projectId, line, path);
    return true;
  });
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
        timeout_seconds, headers, max_deliveries_per_second, max_concurrent, secret_headers, filter,
        retry, transform)
      values (${idsByName.get(t.name) ?? newId("tgt")}, ${endpointId}, ${position}, ${t.name},
        ${t.targetUrl}, ${t.deliveryMode}, ${t.timeoutSeconds}, ${sql.json(t.headers)},
        ${t.maxDeliveriesPerSecond ?? null}, ${t.maxConcurrent ?? null},
        ${sql.json(t.secretHeaders ?? [])}, ${t.filter ? sql.json(t.filter) : null},
        ${t.retry ? sql.json({ ...t.retry }) : null}, ${t.transform ?? null})`;
  }
}

function schemaBytesOf(spec: EndpointSpec): number {
  return spec.schema ? schemaBytes(spec.schema) : 0;
}

/** A JSON column's value; spread, as TypeScript takes no interface (RateLimit) for a JsonValue. */
function jsonOrNull(sql: Queryable, value: JsonObject | RateLimit | CircuitBreaker | null) {
  return value === null ? null : sql.json({ ...value });
}
