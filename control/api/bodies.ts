/** The edge's store of a large request body before it queues the request (store/bodies.ts). */
import { RelayError } from "../../core/errors.ts";
import { insertBody } from "../../store/bodies.ts";
import { requireEdge } from "../auth.ts";
import type { Ctx } from "./context.ts";

export async function storeBody(
  ctx: Ctx,
  project: string,
  requestId: string,
  body: Uint8Array,
): Promise<string> {
  requireEdge(ctx.caller);
  const stored = await insertBody(ctx.sql, project, requestId, body);
  if (!stored) throw new RelayError("not_found", `no project '${project}'`);
  return stored;
}
