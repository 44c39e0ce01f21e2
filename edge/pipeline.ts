/**
 * The edge's pipeline: one envelope per call, handed through an ordered list of steps as Hono's
 * middleware are (`src/compose.ts`). A step refuses a call by throwing a RelayError, or passes the
 * envelope on to `next`, grown by what it learnt; code after its `next` sees the answer.
 */
import type { Callbacks } from "../core/callbacks.ts";
import type { DeliveryTarget, Endpoint, JsonValue, KeyRecord } from "../core/model.ts";
import type { RateDecision } from "../core/rate-limit.ts";
import type { Chunks } from "../core/read-capped.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { ProjectState } from "./control.ts";
import type { CompiledEndpoint } from "./endpoints.ts";

export interface ConnInfo {
  /** The peer's address as the socket reports it. */
  remoteAddress: string;
}

/**
 * An inbound call as the steps read it. A web Request is one (the Deno adapter passes Deno's);
 * the Node adapter builds none: a Request and its body's web stream cost more there than all the
 * steps together (0.3 ms of a stream's 1 ms before its target's call, at one call at a time).
 */
export interface InboundRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Headers;
  /** Aborted when the caller hangs up. */
  readonly signal: AbortSignal;
  /** Read once, by the body step (`readCapped`). */
  readonly body: Chunks | null;
}

/** One inbound call on its way: what it arrived with, then what each step added. */
export interface Envelope {
  readonly request: InboundRequest;
  readonly conn: ConnInfo;
  /** Relay's own headers on its answer (key status, rate limit, request id, Retry-After). */
  readonly responseHeaders: Headers;
  /** The edge's span once the trace step started it: what the call's spans are children of. */
  trace: TraceContext;
  /** The project the Host names (project step); not yet known to hold the key. */
  project?: string;
  /** `/{line}/{endpoint}` when the project led the path (a dev stack's `localhost`), not the Host. */
  route?: string;
  /** The caller's key, valid for the project (auth step). */
  key?: KeyRecord;
  /** A schedule's fire (auth step): its key stands in for the fire, which no allowlist holds back. */
  scheduleId?: string;
  /** The endpoint the path names, its project's state and its compiled rules (endpoint step). */
  endpoint?: Endpoint;
  projectState?: ProjectState;
  compiled?: CompiledEndpoint;
  /** The caller's Idempotency-Key, when it sent one (idempotency step). */
  idempotencyKey?: string | null;
  /** When to deliver: null at once, else a delayed call's time (schedule step). */
  notBefore?: Date | null;
  /** Where to tell the call's deliveries' ends; null when the caller asked none (callbacks step). */
  callbacks?: Callbacks | null;
  /** The whole request body (body step). */
  body?: Uint8Array<ArrayBuffer>;
  /** The body parsed, when the payload step parsed it (a non-empty JSON body). */
  payload?: JsonValue | undefined;
  /** The rate limit's verdict on this call (rate step). */
  rate?: RateDecision;
  /**
   * The endpoint's targets whose filters the call does not match (filter step): `endpoint` then
   * holds only the others.
   */
  skipped?: DeliveryTarget[];
}

/** An envelope holding at least the fields `K`: what a step needs, or what it hands on. */
export type With<K extends keyof Envelope> = Envelope & Required<Pick<Envelope, K>>;
export type Authenticated = With<"project" | "key">;
export type Routed = With<"project" | "key" | "endpoint" | "projectState" | "compiled">;
export type Received = Routed & With<"idempotencyKey" | "notBefore" | "callbacks" | "body">;

export type Next<T> = (envelope: T) => Promise<Response>;
/** One step: takes an envelope of at least `In`, and hands `next` one of at least `Out`. */
export type Step<In, Out = In> = (envelope: In, next: Next<Out>) => Promise<Response>;
/** Answers what a step threw; the steps around it then see that answer. */
export type OnError = (error: unknown, envelope: Envelope) => Response;

/** Steps run in order; the types check that each gets the fields the steps before it added. */
export class Pipeline<In extends Envelope, Out extends Envelope> {
  private constructor(
    private readonly run: Step<In, Out>,
    private readonly onError: OnError,
  ) {}

  static start<T extends Envelope>(onError: OnError): Pipeline<T, T> {
    return new Pipeline<T, T>((envelope, next) => next(envelope), onError);
  }

  use<Grown extends Envelope>(step: Step<Out, Grown>): Pipeline<In, Grown> {
    const { run, onError } = this;
    return new Pipeline<In, Grown>(
      (envelope, next) =>
        run(envelope, async (reached) => {
          try {
            return await step(reached, next);
          } catch (error) {
            return onError(error, reached);
          }
        }),
      onError,
    );
  }

  /** Runs the steps; the last must answer rather than call its `next`. */
  handle(envelope: In): Promise<Response> {
    return this.run(envelope, () => {
      throw new Error("the pipeline's last step passed the call on");
    });
  }
}

/** The name an endpoint has in logs, metrics and the signing keys' map: `{line}/{endpoint}`. */
export function endpointName(endpoint: Endpoint): string {
  return `${endpoint.line}/${endpoint.path}`;
}

/**
 * An answer of Relay's own (a 202, a refusal): never content-sniffed nor kept by a cache (a 202
 * names a request id; a refusal is this call's). A target's answer passes through as it was.
 */
export function json(status: number, body: unknown, headers: Headers): Response {
  headers.set("content-type", "application/json");
  headers.set("x-content-type-options", "nosniff");
  headers.set("cache-control", "no-store");
  return new Response(JSON.stringify(body), { status, headers });
}

/**
 * A call no target received (its filters skipped every one, or a sync or stream target's
 * transformation dropped it): 200 at once, with its request id, whatever the targets' modes.
 */
export function skippedAnswer(requestId: string, headers: Headers): Response {
  headers.set("x-relay-request-id", requestId);
  return json(200, { status: "skipped", requestId }, headers);
}
