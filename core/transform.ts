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
  /**
   * Its run's CPU time, where the runtime can read its thread's (Linux), else its time on the
   * clock; the wait for a sandbox thread is not counted.
   */
  runMs: 50,
  /** Its run's time on the clock, however loaded the machine: what a thread is held at most. */
  wallMs: 1000,
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 256 * 1024,
  /** The body it hands back, as sent. */
  bodyBytes: 5 * 1024 * 1024,
  headers: 64,
  headerBytes: 16 * 1024,
  pathBytes: 2048,
  queryBytes: 8192,
} as const;

/** A call as a transformation sees it (`request.body` is parsed when first read). */
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

/**
 * A call as it goes to a sandbox and comes back: its body as text, parsed there only when the
 * transformation reads it, so one that sets a header or a path costs no parse of a large body.
 */
export interface SandboxCall {
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  bodyText: string;
}

/** The call a transformation handed back; `bodyText` null: the body as it came. */
export type TransformedCall = Omit<SandboxCall, "bodyText"> & { bodyText: string | null };

/** What a run came to: the call to send, none (dropped), or why it failed. */
export type TransformOutcome = { call: TransformedCall } | { dropped: true } | { error: string };

/**
 * Runs a target's transformation for `project` on `call`, away from the caller's thread; the
 * runtime's (./transform-pool.ts). Never rejects: a failure is an outcome.
 */
export type RunTransform = (
  project: string,
  source: string,
  call: SandboxCall,
) => Promise<TransformOutcome>;

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** The call a target would receive untransformed, as a sandbox takes it. */
export function sandboxCall(
  targetUrl: string,
  headers: Record<string, string>,
  body: Uint8Array,
): SandboxCall {
  const url = new URL(targetUrl);
  return {
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers: Object.fromEntries(Object.entries(headers).map(([n, v]) => [n.toLowerCase(), v])),
    bodyText: utf8Decoder.decode(body),
  };
}

/** The call a target would receive untransformed, as its transformation sees it. */
export function transformInput(
  targetUrl: string,
  headers: Record<string, string>,
  body: Uint8Array,
): TransformRequest {
  const { bodyText, ...call } = sandboxCall(targetUrl, headers, body);
  return { method: "POST", ...call, body: bodyValue(bodyText) };
}

/** A body's text as a transformation reads it: parsed as JSON, else the text itself. */
export function bodyValue(text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return text;
  }
}

/** A call as sent: its URL on the target's origin, its headers and body bytes. */
export interface OutgoingCall {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array<ArrayBuffer>;
}

/**
 * The call a transformation handed back, sent to the target's own origin (a path cannot leave
 * it), with the body it set, or the call's own bytes when it set none.
 */
export function outgoingCall(
  targetUrl: string,
  call: TransformedCall,
  body: Uint8Array<ArrayBuffer>,
): OutgoingCall {
  const url = new URL(targetUrl);
  url.pathname = call.path;
  url.search = new URLSearchParams(call.query).toString();
  const sent = call.bodyText === null ? body : utf8.encode(call.bodyText);
  return { url: url.href, headers: call.headers, body: sent };
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
 * What a run handed back, checked: `returned` is the JSON of what the function returned less its
 * body (undefined for nothing), `bodyText` the body it set (null: none set). `null` drops the
 * call; an object of the request's shape, within bounds, is the call to send; anything else fails
 * it with a message that says what was wrong.
 */
export function transformOutcome(
  returned: string | undefined,
  bodyText: string | null,
): TransformOutcome {
  if (returned === undefined)
    return { error: "it returned nothing (return null to drop the call)" };
  const value = JSON.parse(returned) as JsonValue;
  if (value === null) return { dropped: true };
  if (typeof value !== "object" || Array.isArray(value)) {
    return { error: "it returned something other than a request or null" };
  }
  const problem = requestProblem(value) ?? bodyProblem(bodyText);
  if (problem) return { error: problem };
  const { path, query, headers } = value as Omit<TransformedCall, "bodyText">;
  return { call: { path, query, headers, bodyText } };
}

function requestProblem(value: { [key: string]: JsonValue }): string | null {
  const { path, query, headers } = value;
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
    // fetch sends a value's characters as bytes.
    if (/[^\0-\xff]/.test(headerValue)) return `header "${name}" has a character beyond U+00FF`;
    headerBytes += name.length + utf8.encode(headerValue).byteLength;
  }
  if (headerBytes > limits.headerBytes) return `its headers are over ${limits.headerBytes} bytes`;
  return null;
}

function bodyProblem(bodyText: string | null): string | null {
  const limit = TRANSFORM_LIMITS.bodyBytes;
  // A UTF-16 unit is at most three bytes: most bodies need no encoding to be known short enough.
  if (bodyText === null || bodyText.length * 3 <= limit) return null;
  return utf8.encode(bodyText).byteLength > limit ? `its body is over ${limit} bytes` : null;
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
