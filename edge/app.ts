/**
 * The edge relay as one web-standard handler: `fetch(request, conn) => Response`. It imports
 * nothing runtime-specific; adapters in ./adapters give it a socket's address, a `fetch` and a
 * hash. The pipeline runs in the spec's order, so a call breaking two rules gets the earlier:
 * method 405, key 401, line and endpoint 404, IP allowlist 403, body size 413, payload 415/422,
 * rate limit 429, credits 402, then delivery.
 */
import {
  bodyTravelsInline,
  type DeliveryInput,
  decodeBody,
  encodeBody,
  type SyncOutcome,
} from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { forwardableHeaders } from "../core/headers.ts";
import { idempotencyKeyProblem, idempotent } from "../core/idempotency.ts";
import { type Cidr, cidrContains, clientAddress } from "../core/ip.ts";
import { type KeyState, keyState } from "../core/keys.ts";
import { type Endpoint, isProjectSlug, type KeyRecord } from "../core/model.ts";
import type { RateDecision } from "../core/rate-limit.ts";
import type { PayloadValidator } from "../core/schema.ts";
import { hashSecret, isWellFormedApiKey } from "../core/secrets.ts";
import type { Hmac, SigningKey } from "../core/signing.ts";
import type { CallTarget } from "../core/target-request.ts";
import type { ProjectState } from "./control.ts";
import { EndpointRuntime } from "./endpoints.ts";
import type { EdgeState } from "./state.ts";
import { answerHeaders, proxyStream } from "./stream.ts";
import type { WorkflowStarter } from "./temporal.ts";

export interface ConnInfo {
  /** The peer's address as the socket reports it. */
  remoteAddress: string;
}

export interface EdgeDeps {
  state: Pick<EdgeState, "key" | "project" | "now">;
  /** SHA-256 of the presented key. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hashKey?: (plaintext: string) => Uint8Array | Promise<Uint8Array>;
  /** Signs streams' deliveries. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hmac?: Hmac;
  temporal: WorkflowStarter;
  /** Keeps a body too large for Temporal's payloads; answers its reference. */
  storeBody: (project: string, requestId: string, body: Uint8Array) => Promise<string>;
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
}

/** What the handler learnt of a call on its way: the endpoint, once found, and if it streams. */
interface Found extends Pick<Answered, "project" | "endpoint"> {
  streams: boolean;
}

export function createEdge(deps: EdgeDeps): EdgeHandler {
  const hashKey = deps.hashKey ?? hashSecret;
  const runtime = new EndpointRuntime();
  const trustedProxies = deps.trustedProxies ?? [];
  const bodyTimeoutMs = deps.bodyTimeoutMs ?? 30_000;

  return async function relay(request, conn) {
    const started = performance.now();
    const found: Found = { project: null, endpoint: null, streams: false };
    const response = await answer(request, conn, found);
    const { streams, ...named } = found;
    const answered: Answered = {
      ...named,
      // A caller gone before its answer is nginx's 499, not the 5xx nobody received.
      status: request.signal.aborted ? CALLER_LEFT : response.status,
      requestId: response.headers.get("x-relay-request-id"),
      seconds: (performance.now() - started) / 1000,
    };
    // A stream's log line and metrics wait for a timer, which runs once the adapter has written
    // its head and first bytes: they cost a quarter of a millisecond the first byte need not wait.
    if (streams) setTimeout(() => deps.observe?.(answered), 0);
    else deps.observe?.(answered);
    return response;
  };

  async function answer(request: Request, conn: ConnInfo, found: Found): Promise<Response> {
    const headers = new Headers();
    try {
      if (request.method !== "POST") {
        headers.set("allow", "POST");
        throw new RelayError("method_not_allowed", "only POST is relayed");
      }
      // The Host first: under Deno a bad one is in the URL too, which would not parse.
      const project = projectOf(request.headers.get("host") ?? new URL(request.url).host);
      const url = new URL(request.url);
      const source = clientAddress(
        conn.remoteAddress,
        request.headers.get("x-forwarded-for"),
        trustedProxies,
      );
      const { key, state } = await authenticate(
        deps,
        hashKey,
        project,
        request.headers.get("authorization"),
        source ? sourceOf(source) : conn.remoteAddress,
      );
      if (state === "expired_grace") {
        headers.set("x-relay-key-status", "expired_grace");
        if (key.successorUsable) headers.set("x-relay-key-successor-available", "true");
      }
      const { endpoint, projectState } = await findEndpoint(deps, project, url.pathname);
      const endpointName = `${endpoint.line}/${endpoint.path}`;
      found.project = project;
      found.endpoint = endpointName;
      found.streams = endpoint.targets.some((t) => t.deliveryMode === "stream");
      const compiled = runtime.compile(endpoint);
      const limit = endpoint.rateLimit ?? projectState.defaultRateLimit;
      const rate = (consume: boolean) => {
        const decision = runtime.rate(project, endpoint, limit, Date.now(), consume);
        setRateHeaders(headers, decision);
        return decision;
      };
      try {
        checkAllowlist(compiled.allowlist, conn, request.headers, trustedProxies);
        const idempotencyKey = checkIdempotencyKey(request.headers, endpoint);
        const body = await readBody(request, deps.maxBodyBytes, bodyTimeoutMs);
        checkPayload(body, request.headers.get("content-type"), compiled.validate);
        const decision = rate(true);
        if (!decision.allowed) {
          headers.set("retry-after", String(decision.retryAfterSeconds));
          throw new RelayError("rate_limited", "over this endpoint's rate limit; retry later");
        }
        if (projectState.exhaustedPools.includes(key.mode)) {
          throw new RelayError("insufficient_credits", `the ${key.mode} credit pool is empty`);
        }
        return await deliver(deps, {
          project,
          key,
          endpoint,
          request,
          body,
          headers,
          idempotencyKey,
          signingKeys: projectState.signingKeys.get(endpointName) ?? [],
        });
      } catch (error) {
        if (!headers.has("ratelimit-limit")) rate(false);
        throw error;
      }
    } catch (cause) {
      const error = RelayError.from(cause);
      if (error.code === "internal") deps.logError({ err: cause }, "internal error");
      // Too many unknown keys from one source, or lookups in flight: worth a retry shortly.
      if (
        (error.code === "rate_limited" || error.code === "unavailable") &&
        !headers.has("retry-after")
      ) {
        headers.set("retry-after", "1");
      }
      return json(error.status, error.toBody(), headers);
    }
  }
}

interface Call {
  project: string;
  key: KeyRecord;
  endpoint: Endpoint;
  request: Request;
  body: Uint8Array<ArrayBuffer>;
  headers: Headers;
  /** The caller's Idempotency-Key, when it sent one. */
  idempotencyKey: string | null;
  /** The endpoint's signing keys, for a stream the edge delivers itself. */
  signingKeys: SigningKey[];
}

/** A well-formed Idempotency-Key, on an endpoint whose answer a repeat can be given again. */
function checkIdempotencyKey(headers: Headers, endpoint: Endpoint): string | null {
  const key = headers.get("idempotency-key");
  if (key === null) return null;
  const problem = idempotencyKeyProblem(key);
  if (problem) throw new RelayError("bad_request", problem);
  if (endpoint.targets.some((t) => t.deliveryMode === "stream")) {
    throw new RelayError(
      "bad_request",
      "Idempotency-Key is not supported on an endpoint with a stream target: a stream cannot be answered twice",
    );
  }
  return key;
}

/**
 * Async targets are queued (one workflow, 202). A sync target's answer comes back through its
 * own workflow; a stream target is proxied directly. Either way the async targets are queued
 * beside it in the same call (mixed mode, mirrors).
 */
async function deliver(deps: EdgeDeps, call: Call): Promise<Response> {
  const { endpoint } = call;
  const repeatable =
    call.idempotencyKey === null
      ? null
      : await idempotent(
          {
            project: call.project,
            line: endpoint.line,
            endpoint: endpoint.path,
            apiKeyId: call.key.id,
            key: call.idempotencyKey,
          },
          call.body,
        );
  const requestId = repeatable?.requestId ?? deps.newRequestId();
  const bodyTag = repeatable?.bodyTag;
  // A failed delivery's answer names the request too, so its log entry can be found.
  call.headers.set("x-relay-request-id", requestId);
  const async = endpoint.targets.filter((t) => t.deliveryMode === "async");
  const answering = endpoint.targets.find((t) => t.deliveryMode !== "async");
  // Workflows carry a large body by reference; a stream target gets it straight from the edge.
  const throughTemporal = async.length > 0 || answering?.deliveryMode === "sync";
  const bodyRef =
    throughTemporal && !bodyTravelsInline(call.body.byteLength, async.length)
      ? // A repeat with another body must not overwrite the first one's: its copy is tagged.
        await deps
          .storeBody(call.project, bodyTag ? `${requestId}.${bodyTag}` : requestId, call.body)
          .catch(() => {
            throw new RelayError("unavailable", "the request could not be queued; try again");
          })
      : undefined;
  const { targets: _, ...request } = deliveryInput(deps, call, requestId, bodyRef);
  const syncSlot = answering?.deliveryMode === "sync" ? claimSyncSlot(deps, call) : null;
  const queued =
    async.length > 0 ? deps.temporal.startDelivery({ ...request, targets: async }, bodyTag) : null;
  if (!answering) {
    await queued;
    return json(202, { status: "queued", requestId }, call.headers);
  }
  if (answering.deliveryMode === "stream") {
    await queued;
    const { headers: __, bodyBase64: ___, ...record } = request;
    return proxyStream(deps, call, { ...record, target: answering, ownsStatus: !queued });
  }
  const [, outcome] = await Promise.all([
    queued,
    deps.temporal
      .runSync({ ...request, target: answering, ownsStatus: !queued }, call.request.signal, bodyTag)
      .finally(() => syncSlot?.release()),
  ]);
  return syncAnswer(outcome, call.headers, requestId);
}

/**
 * One of the project's sync slots on this edge (WorkflowStarter.claimSync). None free is a 503
 * with Retry-After, answered before anything is queued.
 */
function claimSyncSlot(deps: EdgeDeps, call: Call): { release(): void } {
  const slot = deps.temporal.claimSync(call.project);
  if (slot) return slot;
  call.headers.set("retry-after", "1");
  throw new RelayError("unavailable", "this project has too many sync calls in flight; retry");
}

/** The sync target's own status, body and safe headers; or why there is none. */
function syncAnswer(outcome: SyncOutcome, relayHeaders: Headers, requestId: string): Response {
  switch (outcome.kind) {
    case "answered": {
      const headers = answerHeaders(new Headers(outcome.headers), relayHeaders, requestId);
      const body = decodeBody(outcome.bodyBase64);
      const empty = outcome.status === 204 || outcome.status === 304;
      return new Response(empty ? null : body, { status: outcome.status, headers });
    }
    case "timeout":
      throw new RelayError("target_timeout", "the sync target did not answer in time");
    case "unreachable":
      throw new RelayError("target_unreachable", "the sync target could not be reached");
    case "too_large":
      throw new RelayError("target_unreachable", "the sync target's answer was over 1 MiB");
  }
}

function deliveryInput(
  deps: EdgeDeps,
  call: Call,
  requestId: string,
  bodyRef: string | undefined,
): DeliveryInput {
  return {
    requestId,
    project: call.project,
    line: call.endpoint.line,
    endpoint: call.endpoint.path,
    keyMode: call.key.mode,
    receivedAt: deps.state.now().toISOString(),
    headers: forwardableHeaders(call.request.headers),
    bodyBase64: bodyRef ? "" : encodeBody(call.body),
    ...(bodyRef && { bodyRef }),
    bodyBytes: call.body.byteLength,
    targets: [],
  };
}

/**
 * The project is the first label of the Host header: `{project}.{domain}`. A Host that is not a
 * host (a port of 99999, `%00`, a path) or names no project (an IP address) is a bad request;
 * a first label that cannot be a slug is an unknown project, refused by `authenticate`.
 */
function projectOf(host: string): string {
  // Made only when thrown: an Error's stack costs more than the rest of the check.
  const bad = () => new RelayError("bad_request", "the Host header is not a valid host");
  const [, name = "", port] = /^([^:]+|\[[^\]]*\])(?::(\d{1,5}))?$/.exec(host) ?? [];
  if (!name || Number(port ?? 0) > 65_535) throw bad();
  let hostname: string;
  try {
    hostname = new URL(`http://${name}`).hostname;
  } catch {
    throw bad();
  }
  // The URL parser rewrites what is not a plain name (escapes, IPv4 shorthands, Unicode).
  if (hostname !== name.toLowerCase()) throw bad();
  if (hostname.startsWith("[") || /^[\d.]+$/.test(hostname)) {
    throw new RelayError("bad_request", "the Host header must name a project: {project}.{domain}");
  }
  return hostname.split(".")[0] ?? "";
}

/** Who a key lookup is counted against: an IPv4 address, or an IPv6 /64 (one subscriber's). */
function sourceOf(address: { version: 4 | 6; value: bigint }): string {
  return address.version === 4 ? `4:${address.value}` : `6:${address.value >> 64n}`;
}

/**
 * Every failure answers the same 401: a missing, malformed or unknown key, a key of another
 * project, and an unknown project are indistinguishable to the caller. A well-formed key for a
 * well-formed project always costs one hash and one lookup, found or not; a key or project that
 * cannot exist is refused before either, so it fills no cache and reaches no control plane.
 */
async function authenticate(
  deps: EdgeDeps,
  hashKey: NonNullable<EdgeDeps["hashKey"]>,
  project: string,
  authorization: string | null,
  source: string,
): Promise<{ key: KeyRecord; state: KeyState }> {
  // The scheme is case-insensitive; two Authorization headers arrive joined and match nothing.
  const presented = /^bearer +(\S+)$/i.exec(authorization ?? "")?.[1] ?? "";
  const wrongKey = () => new RelayError("invalid_or_missing_key", "missing or invalid API key");
  if (!isWellFormedApiKey(presented) || !isProjectSlug(project)) throw wrongKey();
  const key = await deps.state.key(project, await hashKey(presented), source);
  const state = key ? keyState(key, deps.state.now()) : null;
  if (!key || state === null) throw wrongKey();
  if (state === "revoked") throw new RelayError("key_revoked", "this API key was revoked");
  if (state === "expired") throw new RelayError("key_expired", "this API key has expired");
  return { key, state };
}

async function findEndpoint(
  deps: EdgeDeps,
  project: string,
  pathname: string,
): Promise<{ endpoint: Endpoint; projectState: ProjectState }> {
  const [line, path, ...rest] = pathname.split("/").slice(1).map(decodeSegment);
  const projectState = await deps.state.project(project);
  const endpoint =
    rest.length === 0
      ? projectState?.endpoints.find((e) => e.line === line && e.path === path)
      : undefined;
  if (!endpoint || !projectState) throw new RelayError("not_found", "no such line or endpoint");
  return { endpoint, projectState };
}

/** A segment that does not decode matches no line or endpoint. */
function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

function checkAllowlist(
  allowlist: Cidr[],
  conn: ConnInfo,
  headers: Headers,
  trustedProxies: Cidr[],
): void {
  if (allowlist.length === 0) return;
  const address = clientAddress(conn.remoteAddress, headers.get("x-forwarded-for"), trustedProxies);
  if (!address || !allowlist.some((cidr) => cidrContains(cidr, address))) {
    throw new RelayError("ip_not_allowed", "this address is not in the endpoint's allowlist");
  }
}

/**
 * With a schema, the body must be JSON that satisfies it (415, then 422 with details). Without
 * one, a body that says it is JSON must still be JSON; any other body passes as it is.
 */
function checkPayload(
  body: Uint8Array,
  contentType: string | null,
  validate: PayloadValidator | null,
) {
  const saysJson = /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType ?? "");
  if (!validate && !saysJson) return;
  if (validate && body.byteLength > 0 && !saysJson) {
    throw new RelayError(
      "unsupported_media_type",
      "this endpoint takes Content-Type: application/json",
    );
  }
  let payload: unknown = null;
  if (body.byteLength > 0) {
    try {
      payload = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
    } catch {
      throw new RelayError("unsupported_media_type", "the body is not valid JSON");
    }
  }
  const problems = validate?.(payload, body.byteLength) ?? [];
  if (problems.length > 0) {
    throw new RelayError(
      "validation_failed",
      "the payload does not match the endpoint's schema",
      problems,
    );
  }
}

/** Reads at most `limit` bytes within `timeoutMs`; refuses a longer or slower body early. */
async function readBody(
  request: Request,
  limit: number,
  timeoutMs: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RelayError("request_timeout", "the body did not arrive in time")),
      timeoutMs,
    );
  });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), timedOut]);
      if (done) break;
      size += value.byteLength;
      if (size > limit) throw tooLarge(limit);
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

function tooLarge(limit: number): RelayError {
  return new RelayError("payload_too_large", `the body exceeds ${limit} bytes`);
}

function setRateHeaders(headers: Headers, decision: RateDecision): void {
  headers.set("ratelimit-limit", String(decision.limit));
  headers.set("ratelimit-remaining", String(decision.remaining));
  headers.set("ratelimit-reset", String(decision.resetSeconds));
}

/** What a request target other than a path gets (`*`, `http://host/path`), from any adapter. */
export const NOT_A_PATH = "the request target must be a path, such as /line/endpoint";

/** The error body for a request an adapter refuses before the handler sees it. */
export function errorAnswer(error: RelayError): Response {
  const headers = new Headers();
  if (error.code === "method_not_allowed") headers.set("allow", "POST");
  return json(error.status, error.toBody(), headers);
}

function json(status: number, body: unknown, headers: Headers): Response {
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(body), { status, headers });
}
