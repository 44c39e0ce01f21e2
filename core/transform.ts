/**
 * A target's transformation: a JavaScript function `(request) => request` its owner saves, run
 * in a sandbox (./sandbox.ts) before each attempt, that may change the body, headers, path and
 * query the target receives, or drop the call (`null`). What it is handed, what it may hand back,
 * and the bounds on both, as pure rules; the runtimes run it off their event loop
 * (./transform-pool.ts).
 */
import type { JsonValue } from "./model.ts";

/** Bounds on a transformation: its source, its run, and what it hands back. */
export const TRANSFORM_LIMITS = {
  sourceBytes: 32 * 1024,
  /** Its run's time, its own (the wait for a sandbox thread not counted). */
  runMs: 50,
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 256 * 1024,
  /** The body it hands back, as sent. */
  bodyBytes: 5 * 1024 * 1024,
  headers: 64,
  headerBytes: 16 * 1024,
  pathBytes: 2048,
  queryBytes: 8192,
} as const;

/** A call as a transformation sees it, and as it hands one back. */
export interface TransformRequest {
  method: "POST";
  /** The target URL's path, as `/hooks/orders`. */
  path: string;
  /** The target URL's query, by name (the last of a repeated name). */
  query: Record<string, string>;
  /** The headers it would be sent with: the caller's forwardable ones, the target's configured. */
  headers: Record<string, string>;
  /** The body parsed as JSON; its text when it is not JSON. */
  body: JsonValue;
}

/** What a run came to: the call to send, none (dropped), or why it failed. */
export type TransformOutcome =
  | { request: TransformRequest }
  | { dropped: true }
  | { error: string };

/**
 * Runs a target's transformation for `project` on `request`, away from the caller's thread; the
 * runtime's (./transform-pool.ts). Never rejects: a failure is an outcome.
 */
export type RunTransform = (
  project: string,
  source: string,
  request: TransformRequest,
) => Promise<TransformOutcome>;

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** The call a target would receive untransformed, as its transformation is handed it. */
export function transformInput(
  targetUrl: string,
  headers: Record<string, string>,
  body: Uint8Array,
): TransformRequest {
  const url = new URL(targetUrl);
  const text = utf8Decoder.decode(body);
  let parsed: JsonValue = text;
  try {
    parsed = JSON.parse(text) as JsonValue;
  } catch {
    // not JSON: the transformation gets its text
  }
  return {
    method: "POST",
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers: Object.fromEntries(Object.entries(headers).map(([n, v]) => [n.toLowerCase(), v])),
    body: parsed,
  };
}

/** The call as sent: its URL on the target's origin, its headers and body bytes. */
export interface TransformedCall {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array<ArrayBuffer>;
}

/**
 * The call a transformation handed back, sent to the target's own origin (a path cannot leave
 * it): a string body goes as its text, anything else as JSON.
 */
export function transformedCall(targetUrl: string, request: TransformRequest): TransformedCall {
  const url = new URL(targetUrl);
  url.pathname = request.path;
  url.search = new URLSearchParams(request.query).toString();
  const body = typeof request.body === "string" ? request.body : JSON.stringify(request.body);
  return { url: url.href, headers: request.headers, body: utf8.encode(body) };
}

/** Headers a transformation may not set: the connection's and the body's framing. */
const FRAMING_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "content-length",
  "expect",
]);

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/**
 * What a run handed back (`undefined`, or its JSON text), checked: `null` drops the call; an
 * object of the request's shape, within bounds, is the call to send; anything else fails it with
 * a message that says what was wrong.
 */
export function transformOutcome(output: string | undefined): TransformOutcome {
  if (output === undefined) return { error: "it returned nothing (return null to drop the call)" };
  if (utf8.encode(output).byteLength > TRANSFORM_LIMITS.bodyBytes * 2) {
    return { error: `it returned more than ${TRANSFORM_LIMITS.bodyBytes} bytes of body` };
  }
  const value = JSON.parse(output) as JsonValue;
  if (value === null) return { dropped: true };
  if (typeof value !== "object" || Array.isArray(value)) {
    return { error: "it returned something other than a request or null" };
  }
  const problem = requestProblem(value);
  if (problem) return { error: problem };
  return { request: value as unknown as TransformRequest };
}

function requestProblem(value: { [key: string]: JsonValue }): string | null {
  const { path, query, headers, body } = value;
  const limits = TRANSFORM_LIMITS;
  if (typeof path !== "string" || !path.startsWith("/") || path.startsWith("//")) {
    return "its path is not a string starting with one /";
  }
  if (utf8.encode(path).byteLength > limits.pathBytes) {
    return `its path is over ${limits.pathBytes} bytes`;
  }
  if (!isStringRecord(query)) return "its query is not an object of strings";
  if (utf8.encode(new URLSearchParams(query).toString()).byteLength > limits.queryBytes) {
    return `its query is over ${limits.queryBytes} bytes`;
  }
  if (!isStringRecord(headers)) return "its headers are not an object of strings";
  const names = Object.keys(headers);
  if (names.length > limits.headers) return `it set more than ${limits.headers} headers`;
  let headerBytes = 0;
  for (const name of names) {
    if (!HEADER_NAME.test(name)) return `header "${name}" is not a lowercase header name`;
    if (FRAMING_HEADERS.has(name)) return `header "${name}" is the connection's, not its to set`;
    const headerValue = headers[name] as string;
    if (/[\r\n\0]/.test(headerValue)) return `header "${name}" holds a line break or NUL`;
    headerBytes += name.length + utf8.encode(headerValue).byteLength;
  }
  if (headerBytes > limits.headerBytes) return `its headers are over ${limits.headerBytes} bytes`;
  if (body === undefined) return 'it has no body (an empty one is "")';
  const sent = typeof body === "string" ? body : JSON.stringify(body);
  if (utf8.encode(sent).byteLength > limits.bodyBytes) {
    return `its body is over ${limits.bodyBytes} bytes`;
  }
  return null;
}

function isStringRecord(value: JsonValue | undefined): value is Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((v) => typeof v === "string");
}

/** What a member may save as a transformation: its size; the sandbox checks it compiles. */
export function transformSizeProblem(source: string): string | null {
  if (source.trim() === "") return "a transformation is a function, not empty";
  const bytes = utf8.encode(source).byteLength;
  return bytes > TRANSFORM_LIMITS.sourceBytes
    ? `a transformation is at most ${TRANSFORM_LIMITS.sourceBytes} bytes`
    : null;
}
