/**
 * The edge relay as one web-standard handler: `fetch(request, conn) => Response`. It imports
 * nothing runtime-specific; adapters in ./adapters give it a socket's address, a `fetch` and a
 * hash. The steps (./steps, one file each) run in the spec's order, so a call breaking two
 * rules gets the earlier: Host 400 (401 off the edge's domain), CDN-Loop 508, method 405, key 401,
 * line and endpoint 404, IP allowlist 403, Idempotency-Key 400, body size 413, payload 415/422,
 * rate limit 429, targets' filters (a call every target skips: 200), credits 402 (and the cap on
 * waiting deliveries, 409), then delivery.
 */
import { RelayError } from "../core/errors.ts";
import { loopMark } from "../core/loop.ts";
import { hashSecret } from "../core/secrets.ts";
import { markRefused, untraced } from "../core/tracing.ts";
import type { EdgeDeps } from "./deps.ts";
import { EndpointRuntime } from "./endpoints.ts";
import {
  type ConnInfo,
  type Envelope,
  type InboundRequest,
  json,
  Pipeline,
  type With,
} from "./pipeline.ts";
import { allowlist } from "./steps/allowlist.ts";
import { auth } from "./steps/auth.ts";
import { body } from "./steps/body.ts";
import { callbacks } from "./steps/callbacks.ts";
import { credits } from "./steps/credits.ts";
import { deliver } from "./steps/deliver.ts";
import { endpoint } from "./steps/endpoint.ts";
import { filter } from "./steps/filter.ts";
import { idempotency } from "./steps/idempotency.ts";
import { loop } from "./steps/loop.ts";
import { method } from "./steps/method.ts";
import { observe } from "./steps/observe.ts";
import { payload } from "./steps/payload.ts";
import { project } from "./steps/project.ts";
import { rate, rateHeaders } from "./steps/rate.ts";
import { schedule } from "./steps/schedule.ts";
import { trace } from "./steps/trace.ts";

export type EdgeHandler = (request: InboundRequest, conn: ConnInfo) => Promise<Response>;

/** A call whose Host named its project: what the checks before the key's see. */
type Named = With<"project">;

export function createEdge(deps: EdgeDeps): EdgeHandler {
  const runtime = new EndpointRuntime(deps.rateShares && { shares: deps.rateShares });
  const trustedProxies = deps.trustedProxies ?? [];
  // A refusal, or a failure of Relay's own, answered with the error body and Relay's headers.
  const pipeline = Pipeline.start<Envelope>((cause, envelope) => {
    const error = RelayError.from(cause);
    if (error.code === "internal") deps.logError({ err: cause }, "internal error");
    markRefused(envelope.trace, error.code);
    const headers = envelope.responseHeaders;
    // Too many unknown keys from one source, or lookups in flight: worth a retry shortly.
    if (
      (error.code === "rate_limited" || error.code === "unavailable") &&
      !headers.has("retry-after")
    ) {
      headers.set("retry-after", "1");
    }
    return json(error.status, error.toBody(), headers);
  })
    .use(trace)
    .use(observe(deps.observe))
    .use(project(deps.edgeDomain))
    .use(loop<Named>(loopMark(deps.edgeDomain)))
    .use(method<Named>)
    .use(auth(deps.state, deps.hashKey ?? hashSecret, trustedProxies, deps.fireKey))
    .use(endpoint(deps.state, runtime))
    // Every answer once the endpoint is found states its rate limit, refusals included.
    .use(rateHeaders(runtime))
    .use(allowlist(trustedProxies))
    .use(idempotency)
    .use(schedule(deps.state))
    .use(
      callbacks({ allowPrivate: deps.allowPrivateTargets ?? false, relayDomain: deps.edgeDomain }),
    )
    .use(body(deps.maxBodyBytes, deps.bodyTimeoutMs ?? 30_000))
    .use(payload)
    .use(rate(runtime))
    .use(filter(deps))
    .use(credits)
    .use(deliver(deps));
  return (request, conn) =>
    pipeline.handle({ request, conn, responseHeaders: new Headers(), trace: untraced });
}

/** What a request target other than a path gets (`*`, `http://host/path`), from any adapter. */
export const NOT_A_PATH = "the request target must be a path, such as /line/endpoint";

/** The error body for a request an adapter refuses before the handler sees it. */
export function errorAnswer(error: RelayError): Response {
  const headers = new Headers();
  if (error.code === "method_not_allowed") headers.set("allow", "POST");
  return json(error.status, error.toBody(), headers);
}
