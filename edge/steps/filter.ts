import { skippedTargets } from "../../core/delivery.ts";
import { notQueued } from "../../core/errors.ts";
import { targetsByFilter } from "../../core/filter.ts";
import type { EdgeDeps } from "../deps.ts";
import { type Received, type Step, skippedAnswer } from "../pipeline.ts";
import { requestOf } from "./batched.ts";
import { requestIdOf } from "./deliver.ts";

/**
 * Targets' filters (core/filter.ts): a target whose filter does not match the call is skipped.
 * The steps after this one see only the targets kept, so a skipped one is never reserved for,
 * queued, called or charged; the request log names it with the reason. A call every target
 * skips is logged as `skipped` and answered 200 at once: there is nothing to wait for.
 */
export function filter(deps: EdgeDeps): Step<Received> {
  return async function filter(call, next) {
    const { kept, skipped } = targetsByFilter(
      call.endpoint.targets,
      call.body,
      call.request.headers,
      call.payload,
    );
    if (skipped.length === 0) return next(call);
    if (kept.length > 0) {
      return next({ ...call, endpoint: { ...call.endpoint, targets: kept }, skipped });
    }
    const { id: requestId } = await requestIdOf(deps, call);
    // Logged before the answer, as a queued call is accepted first: its id is readable once told.
    await deps
      .recordSkipped({ ...requestOf(deps, call, requestId), skipped: skippedTargets(skipped) })
      .catch((err: unknown) => {
        deps.logError({ err, requestId }, "a skipped call could not be logged");
        throw notQueued();
      });
    return skippedAnswer(requestId, call.responseHeaders);
  };
}
