/**
 * The failure queue: failed and partially failed requests, listed and replayed in bulk (one
 * request's replay, of any finished request, is ./replay.ts).
 */
import { z } from "zod";
import { type ErrorCode, RelayError } from "../../core/errors.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { replayRequest } from "./replay.ts";
import { failureStatuses, listRequests, requestFilter } from "./requests.ts";
import { parseInput } from "./validation.ts";

export const replayFailuresBody = z.strictObject(requestFilter);

/** Bulk replays walk the queue in pages of this size, at most this many pages. */
const BULK_PAGE = 200;
const BULK_PAGES = 50;

export function listFailures(ctx: Ctx, slug: string, query: unknown) {
  return listRequests(ctx, slug, query, failureStatuses);
}

/** Replays every failure matching the filter; answers how many it started. */
export async function replayFailures(
  ctx: Ctx,
  slug: string,
  input: unknown,
): Promise<{ replayed: number }> {
  await projectAccess(ctx, slug);
  const filter = parseInput(replayFailuresBody, input);
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < BULK_PAGES; page++) {
    const { requests, nextCursor } = await listFailures(ctx, slug, {
      ...filter,
      cursor,
      limit: BULK_PAGE,
    });
    ids.push(...requests.map((r) => r.requestId));
    if (!nextCursor) break;
    cursor = nextCursor;
  }
  let replayed = 0;
  for (const id of ids) {
    // A request with nothing replayable (a sync call, past retention) is skipped, not fatal.
    const started = await replayRequest(ctx, slug, id).then(
      () => true,
      (error: unknown) => {
        if (error instanceof RelayError && error.code === "conflict") return false;
        // The pool or the cap is full: the rest would be refused too. What started stands.
        if (replayed > 0 && error instanceof RelayError && STOPS.includes(error.code)) return null;
        throw error;
      },
    );
    if (started === null) break;
    if (started) replayed++;
  }
  return { replayed };
}

/** Refusals that end a bulk replay (after at least one replay started; before, its answer). */
const STOPS: readonly ErrorCode[] = ["insufficient_credits", "limit_exceeded"];
