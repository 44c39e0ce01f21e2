/**
 * The edge relay as one web-standard handler: `fetch(request, conn) => Response`. It imports
 * nothing runtime-specific; adapters in ./adapters give it a socket's address, a `fetch` and a
 * hash. The steps (./steps, one file each) run in the spec's order, so a call breaking two
 * rules gets the earlier: Host 400 (401 off the edge's domain), CDN-Loop 508, method 405, key 401,
 * line and endpoint 404, IP allowlist 403, Idempotency-Key 400, body size 413, payload 415/422,
 * rate limit 429, credits 402 (and the cap on waiting deliveries, 409), then delivery.
 */
import type { StreamRecord } from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import type { Cidr } from "../core/ip.ts";
import { loopMark } from "../core/loop.ts";
import { hashSecret } from "../core/secrets.ts";
import type { Hmac } from "../core/signing.ts";
import type { CallTarget } from "../core/target-request.ts";
import { markRefused, untraced } from "../core/tracing.ts";
import type { ControlPlane } from "./control.ts";
import { EndpointRuntime } from "./endpoints.ts";
import { type Envelope, json, Pipeline, type With } from "./pipeline.ts";
import type { RateShares } from "./rate-shares.ts";
import type { EdgeState } from "./state.ts";
import { allowlist } from "./steps/allowlist.ts";
import { auth } from "./steps/auth.ts";
import { body } from "./steps/body.ts";
import { credits } from "./steps/credits.ts";
import { deliver } from "./steps/deliver.ts";
import { endpoint } from "./steps/endpoint.ts";
import { idempotency } from "./steps/idempotency.ts";
import { loop } from "./steps/loop.ts";
import { method } from "./steps/method.ts";
import { observe } from "./steps/observe.ts";
import { payload } from "./steps/payload.ts";
import { project } from "./steps/project.ts";
import { rate, rateHeaders } from "./steps/rate.ts";
import { schedule } from "./steps/schedule.ts";
import { trace } from "./steps/trace.ts";
import type { WorkflowStarter } from "./temporal.ts";

export interface ConnInfo {
  /** The peer's address as the socket reports it. */
  remoteAddress: string;
}

export interface EdgeDeps {
  state: Pick<EdgeState, "key" | "endpoint" | "now">;
  /** `RELAY_EDGE_DOMAIN`: the only hosts served are `{project}.{domain}`; also the CDN-Loop mark. */
  edgeDomain: string;
  /** SHA-256 of the presented key. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hashKey?: (plaintext: string) => Uint8Array | Promise<Uint8Array>;
  /** Signs streams' deliveries. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hmac?: Hmac;
  temporal: WorkflowStarter;
  /** Takes a finished stream to be logged and billed (./stream-records.ts); never throws. */
  recordStream: (record: StreamRecord) => void;
  /** Keeps a body too large for Temporal's payloads; answers its reference. */
  storeBody: (project: string, requestId: string, body: Uint8Array) => Promise<string>;
  /** Holds a call's credits and a delayed call's place before it is queued (control plane). */
  reserveDeliveries: ControlPlane["reserveDeliveries"];
  releaseDeliveries: ControlPlane["releaseDeliveries"];
  /** Reaches stream targets: pooled, and connecting only to addresses the target rules allow. */
  callTarget: CallTarget;
  newRequestId: () => string;
  maxBodyBytes: number;
  /** A body still arriving after this long is refused (408). */
  bodyTimeoutMs?: number;
  /** Peers whose X-Forwarded-For is believed. */
  trustedProxies?: Cidr[];
  /** Told of every answer, for the log and the metrics. */
  observe?: (answered: Answered) => void;
  /** Where failures of Relay's own go (a structured logger's `error`). */
  logError: (fields: Record<string, unknown>, message: string) => void;
  /** This edge's shares of endpoints' rate limits; without, whole limits (an edge alone). */
  rateShares?: RateShares;
}

export type EdgeHandler = (request: Request, conn: ConnInfo) => Promise<Response>;

/** The status logged and counted for a call whose caller hung up before its answer. */
export const CALLER_LEFT = 499;

/** One inbound call, answered. The endpoint is named only once it was found. */
export interface Answered {
  status: number;
  requestId: string | null;
  project: string | null;
  /** `{line}/{endpoint}`. */
  endpoint: string | null;
  /** Until the answer's headers (a stream runs on after). */
  seconds: number;
  /** The call's trace, when the edge exports traces: the log line leads to it. */
  traceId?: string | undefined;
}

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
    .use(auth(deps.state, deps.hashKey ?? hashSecret, trustedProxies))
    .use(endpoint(deps.state, runtime))
    // Every answer once the endpoint is found states its rate limit, refusals included.
    .use(rateHeaders(runtime))
    .use(allowlist(trustedProxies))
    .use(idempotency)
    .use(schedule(deps.state))
    .use(body(deps.maxBodyBytes, deps.bodyTimeoutMs ?? 30_000))
    .use(payload)
    .use(rate(runtime))
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
