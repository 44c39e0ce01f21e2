/**
 * The edge relay as one web-standard handler: `fetch(request, conn) => Response`. It imports
 * nothing runtime-specific; adapters in ./adapters give it a socket's address and a `fetch`.
 */
import type { DeliveryInput } from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { forwardableHeaders } from "../core/headers.ts";
import { keyState } from "../core/keys.ts";
import type { Endpoint, KeyRecord } from "../core/model.ts";
import { hashSecret } from "../core/secrets.ts";
import type { EdgeState } from "./state.ts";
import type { WorkflowStarter } from "./temporal.ts";

export interface ConnInfo {
  /** The peer's address as the socket reports it. */
  remoteAddress: string;
}

export interface EdgeDeps {
  state: Pick<EdgeState, "key" | "project" | "now">;
  /** SHA-256 of the presented key. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hashKey?: (plaintext: string) => Uint8Array | Promise<Uint8Array>;
  temporal: WorkflowStarter;
  newRequestId: () => string;
  maxBodyBytes: number;
}

export type EdgeHandler = (request: Request, conn: ConnInfo) => Promise<Response>;

export function createEdge(deps: EdgeDeps): EdgeHandler {
  const hashKey = deps.hashKey ?? hashSecret;
  return async function relay(request) {
    const extraHeaders = new Headers();
    try {
      if (request.method !== "POST") {
        extraHeaders.set("allow", "POST");
        throw new RelayError("method_not_allowed", "only POST is relayed");
      }
      const url = new URL(request.url);
      const project = projectOf(request.headers.get("host") ?? url.host);
      const key = await authenticate(deps, hashKey, project, request.headers.get("authorization"));
      const state = keyState(key, deps.state.now());
      if (state === "expired_grace") {
        extraHeaders.set("x-relay-key-status", "expired_grace");
        if (key.successorUsable) extraHeaders.set("x-relay-key-successor-available", "true");
      }
      const endpoint = await findEndpoint(deps, project, url.pathname);
      const body = await readBody(request, deps.maxBodyBytes);
      const async = endpoint.targets.filter((t) => t.deliveryMode === "async");
      if (async.length !== endpoint.targets.length) {
        throw new RelayError("unavailable", "sync and stream targets are not relayed yet");
      }
      const requestId = deps.newRequestId();
      const input: DeliveryInput = {
        requestId,
        project,
        line: endpoint.line,
        endpoint: endpoint.path,
        keyMode: key.mode,
        receivedAt: deps.state.now().toISOString(),
        headers: forwardableHeaders(request.headers),
        body: new TextDecoder().decode(body),
        bodyBytes: body.byteLength,
        targets: async,
      };
      await deps.temporal.startDelivery(input);
      return json(202, { status: "queued", requestId }, extraHeaders);
    } catch (cause) {
      const error = RelayError.from(cause);
      if (error.code === "internal") console.error(cause);
      return json(error.status, error.toBody(), extraHeaders);
    }
  };
}

/** The project is the first label of the Host header: `{project}.{domain}`. */
function projectOf(host: string): string {
  const hostname = host.replace(/:\d+$/, "").toLowerCase();
  return hostname.split(".")[0] ?? "";
}

/**
 * Every failure answers the same 401 after the same work: a missing, malformed or unknown key,
 * a key of another project, and an unknown project are indistinguishable to the caller.
 */
async function authenticate(
  deps: EdgeDeps,
  hashKey: NonNullable<EdgeDeps["hashKey"]>,
  project: string,
  authorization: string | null,
): Promise<KeyRecord> {
  const presented = /^Bearer (.+)$/.exec(authorization ?? "")?.[1] ?? "";
  const key = await deps.state.key(project, await hashKey(presented));
  const state = key ? keyState(key, deps.state.now()) : null;
  if (!key || state === null) {
    throw new RelayError("invalid_or_missing_key", "missing or invalid API key");
  }
  if (state === "revoked") throw new RelayError("key_revoked", "this API key was revoked");
  if (state === "expired") throw new RelayError("key_expired", "this API key has expired");
  return key;
}

async function findEndpoint(deps: EdgeDeps, project: string, pathname: string): Promise<Endpoint> {
  const [line, path, ...rest] = pathname.split("/").slice(1).map(decodeURIComponent);
  const state = await deps.state.project(project);
  const endpoint =
    rest.length === 0
      ? state?.endpoints.find((e) => e.line === line && e.path === path)
      : undefined;
  if (!endpoint) throw new RelayError("not_found", "no such line or endpoint");
  return endpoint;
}

/** Reads at most `limit` bytes; a longer body is refused without reading it all. */
async function readBody(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk);
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

function json(status: number, body: unknown, headers: Headers): Response {
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(body), { status, headers });
}
