/**
 * Large request bodies, kept in Postgres while their deliveries need them: the edge stores a
 * body over INLINE_BODY_BYTES before queueing, and the worker reads it back by reference.
 */
import { RelayError } from "../../core/errors.ts";
import { requireEdge } from "../auth.ts";
import type { Sql } from "../db/client.ts";
import type { Ctx } from "./context.ts";

export async function storeBody(
  ctx: Ctx,
  project: string,
  requestId: string,
  body: Uint8Array,
): Promise<string> {
  requireEdge(ctx.caller);
  const [stored] = await ctx.sql<{ requestId: string }[]>`
    insert into bodies (request_id, project_id, body)
    select ${requestId}, id, ${Buffer.from(body)} from projects where slug = ${project}
    on conflict (request_id) do update set body = excluded.body
    returning request_id`;
  if (!stored) throw new RelayError("not_found", `no project '${project}'`);
  return stored.requestId;
}

export async function loadBody(sql: Sql, ref: string): Promise<Uint8Array<ArrayBuffer>> {
  const [row] = await sql<{ body: Buffer }[]>`select body from bodies where request_id = ${ref}`;
  if (!row) throw new Error(`stored body ${ref} is gone`);
  return new Uint8Array(row.body);
}
