/**
 * Large request bodies, kept in Postgres while their deliveries need them: the edge stores a
 * body over INLINE_BODY_BYTES before queueing, and the worker reads it back by reference. They
 * travel in base64, decoded and encoded by Postgres: the driver sends a bytea parameter, and
 * reads a bytea column, as hex text, twice the bytes and, in Node, four times the CPU to write
 * and to read (docs/benchmarks.md, Every kind of call).
 */
import type { StoredBody } from "../core/billing.ts";
import type { Queryable, Sql } from "./db.ts";

/** Stores (or replaces) a request's body; answers its reference, or null for no such project. */
export async function insertBody(
  sql: Sql,
  project: string,
  requestId: string,
  body: Uint8Array,
): Promise<string | null> {
  const [stored] = await sql<{ requestId: string }[]>`
    insert into bodies (request_id, project_id, body)
    select ${requestId}, id, decode(${base64Of(body)}, 'base64') from projects where slug = ${project}
    on conflict (request_id) do update set body = excluded.body
    returning request_id`;
  return stored?.requestId ?? null;
}

/**
 * Stores the bodies of calls accepted together (control/api/reservations.ts `acceptCalls`) in the
 * caller's transaction, one statement each, sent together; a body stored already (the edge's
 * retry) is replaced.
 */
export async function insertBodies(
  q: Queryable,
  project: string,
  bodies: readonly StoredBody[],
): Promise<void> {
  await Promise.all(
    bodies.map(
      ({ requestId, body }) => q`
        insert into bodies (request_id, project_id, body)
        select ${requestId}, id, decode(${base64Of(body)}, 'base64') from projects where slug = ${project}
        on conflict (request_id) do update set body = excluded.body`,
    ),
  );
}

export async function loadBody(sql: Sql, ref: string): Promise<Uint8Array<ArrayBuffer>> {
  const [row] = await sql<{ body: string }[]>`
    select encode(body, 'base64') as body from bodies where request_id = ${ref}`;
  if (!row) throw new Error(`stored body ${ref} is gone`);
  // Postgres breaks its base64 into lines, which Node's decoder skips.
  return new Uint8Array(Buffer.from(row.body, "base64"));
}

/** Node's own base64, not core/base64.ts's table: native, and this is Node-only code. */
const base64Of = (body: Uint8Array) =>
  Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64");
