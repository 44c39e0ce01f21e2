/** Envelopes for the steps' unit tests: a call to acme's `v1/hook`, grown to the stage a step needs. */
import { RelayError } from "../../core/errors.ts";
import type { Endpoint, KeyRecord } from "../../core/model.ts";
import { untraced } from "../../core/tracing.ts";
import type { ProjectState } from "../control.ts";
import { EndpointRuntime } from "../endpoints.ts";
import type { Envelope, Next, Received } from "../pipeline.ts";

export function hookEndpoint(fields: Partial<Endpoint> = {}): Endpoint {
  return {
    line: "v1",
    path: "hook",
    targets: [
      {
        id: "t",
        name: "t",
        targetUrl: "http://t",
        deliveryMode: "async",
        timeoutSeconds: 30,
        headers: {},
      },
    ],
    ipAllowlist: [],
    schema: null,
    rateLimit: null,
    ordering: "none",
    version: 1,
    updatedAt: new Date(0),
    ...fields,
  };
}

export const liveKey: KeyRecord = {
  id: "key_1",
  project: "acme",
  mode: "live",
  expiresAt: null,
  revokedAt: null,
  successorUsable: false,
};

export function projectState(endpoint: Endpoint, fields: Partial<ProjectState> = {}): ProjectState {
  return {
    plan: "paid",
    defaultRateLimit: { requestsPerSecond: 100, burst: 200 },
    exhaustedPools: [],
    signingKeys: new Map(),
    maxWaitingDeliveries: 10_000,
    heldDeliveriesFull: false,
    heldTargetIds: new Set(),
    projectRateLimit: { requestsPerSecond: 1_000, burst: 2_000 },
    endpoints: new Map([[`${endpoint.line}/${endpoint.path}`, endpoint]]),
    ...fields,
  };
}

/** EdgeState's `endpoint` over one project's state, as a warm cache answers it. */
export function endpointIn(state: ProjectState | null) {
  return async (_project: string, line: string, path: string) => {
    const endpoint = state?.endpoints.get(`${line}/${path}`);
    return state && endpoint ? { projectState: state, endpoint } : null;
  };
}

/** A POST as the edge gets it, from `remoteAddress`. */
export function arrived(init: RequestInit = {}, remoteAddress = "192.0.2.1"): Envelope {
  const request = new Request("http://acme.relay.test/v1/hook", { method: "POST", ...init });
  return { request, conn: { remoteAddress }, responseHeaders: new Headers(), trace: untraced };
}

/** An envelope as the body step hands it on: every field up to the body filled. */
export function received(
  envelope: Envelope,
  endpoint = hookEndpoint(),
  state = projectState(endpoint),
): Received {
  return Object.assign(envelope, {
    project: "acme",
    key: liveKey,
    endpoint,
    projectState: state,
    compiled: new EndpointRuntime().compile(endpoint),
    idempotencyKey: null,
    notBefore: null,
    callbacks: null,
    body: new Uint8Array(),
  });
}

/** A `next` that answers 204 and keeps the envelopes it was handed. */
export function passed<T>(): Next<T> & { handed: T[] } {
  const handed: T[] = [];
  return Object.assign(
    async (envelope: T) => {
      handed.push(envelope);
      return new Response(null, { status: 204 });
    },
    { handed },
  );
}

/** The RelayError a step refused with; fails when it answered instead. */
export async function refusal(answer: Promise<Response>): Promise<RelayError> {
  const response = await answer.catch((error: unknown) => error);
  if (response instanceof RelayError) return response;
  throw new Error(
    `expected a refusal, got ${response instanceof Response ? response.status : response}`,
  );
}
