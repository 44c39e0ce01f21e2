/**
 * The failure queue: failed and partially failed requests, listed and replayed in bulk, a
 * recovery job (./recoveries.ts); one request's replay, of any finished request, is ./replay.ts.
 */
import { z } from "zod";
import type { Ctx } from "./context.ts";
import { type RecoveryView, recoverFailures } from "./recoveries.ts";
import { failureStatuses, listRequests, requestFilter } from "./requests.ts";
import { parseInput } from "./validation.ts";

export const replayFailuresBody = z.strictObject(requestFilter);

export function listFailures(ctx: Ctx, slug: string, query: unknown) {
  return listRequests(ctx, slug, query, failureStatuses);
}

/** Replays every failure matching the filter: the recovery job that does it, as it starts. */
export function replayFailures(ctx: Ctx, slug: string, input: unknown): Promise<RecoveryView> {
  return recoverFailures(ctx, slug, parseInput(replayFailuresBody, input));
}
