import { RelayError } from "../../core/errors.ts";
import type { RateDecision } from "../../core/rate-limit.ts";
import { type EndpointRuntime, PROJECT_WIDE } from "../endpoints.ts";
import type { Received, Routed, Step } from "../pipeline.ts";

/**
 * Takes a token from the endpoint's bucket, then from its project's over all its endpoints (429
 * with Retry-After when either has none): a project cannot multiply its rate by its endpoints.
 */
export function rate(runtime: EndpointRuntime): Step<Received> {
  return async function rate(envelope, next) {
    const decision = decide(runtime, envelope, true);
    envelope.rate = decision;
    if (!decision.allowed) {
      envelope.responseHeaders.set("retry-after", String(decision.retryAfterSeconds));
      throw new RelayError("rate_limited", "over this endpoint's rate limit; retry later");
    }
    const { project, projectState } = envelope;
    const limit = projectState.projectRateLimit;
    const projectWide = runtime.rate(project, PROJECT_WIDE, limit, Date.now(), true);
    if (!projectWide.allowed) {
      envelope.responseHeaders.set("retry-after", String(projectWide.retryAfterSeconds));
      throw new RelayError(
        "rate_limited",
        "over this project's rate limit (all its endpoints together); retry later",
      );
    }
    return next(envelope);
  };
}

/**
 * After-step: every answer from an endpoint that was found states its rate limit: the verdict on
 * this call, or for a call refused before the rate step, the bucket as it stands.
 */
export function rateHeaders(runtime: EndpointRuntime): Step<Routed> {
  return async function rateHeaders(envelope, next) {
    const response = await next(envelope);
    const decision = envelope.rate ?? decide(runtime, envelope, false);
    response.headers.set("ratelimit-limit", String(decision.limit));
    response.headers.set("ratelimit-remaining", String(decision.remaining));
    response.headers.set("ratelimit-reset", String(decision.resetSeconds));
    return response;
  };
}

/** With `consume` false only reports the bucket, for calls refused before the rate step. */
function decide(runtime: EndpointRuntime, envelope: Routed, consume: boolean): RateDecision {
  const { project, endpoint, projectState } = envelope;
  const limit = endpoint.rateLimit ?? projectState.defaultRateLimit;
  return runtime.rate(project, endpoint, limit, Date.now(), consume);
}
