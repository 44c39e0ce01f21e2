/**
 * Serves the edge handler with node:http. The caller hanging up aborts the call's signal,
 * and response bodies are written chunk by chunk as they arrive. (The connection to targets,
 * shared with the worker, is platform/targets.ts.)
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { RelayError } from "../../core/errors.ts";
import { type EdgeHandler, errorAnswer, NOT_A_PATH } from "../app.ts";
import type { EdgeDeps } from "../deps.ts";
import type { InboundRequest } from "../pipeline.ts";

/** `logError` gets a failure the handler did not answer. */
export function serveNode(handler: EdgeHandler, logError: EdgeDeps["logError"]): Server {
  return createServer((req, res) => {
    handle(handler, req, res).catch((err: unknown) => {
      logError({ err }, "unanswered failure");
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
      res.end('{"error":{"code":"internal","message":"internal error"}}');
    });
  });
}

async function handle(handler: EdgeHandler, req: IncomingMessage, res: ServerResponse) {
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  const request = toRequest(req, abort.signal);
  const response =
    request instanceof RelayError
      ? errorAnswer(request)
      : await handler(request, { remoteAddress: req.socket.remoteAddress ?? "" });
  // Entries, not assignments: a header named `__proto__` is a property like any other.
  const out = Object.fromEntries(
    [...response.headers].map(([name, value]) => [
      name,
      name === "set-cookie" ? response.headers.getSetCookie() : value,
    ]),
  );
  // Answered before the body was read (413, 401...): the rest is read and dropped first, within
  // bounds, so a caller that writes its whole body before reading (Node's http.request, Python's
  // http.client) meets the answer, not a reset (nginx's lingering close does the same). Read
  // whole, the connection carries the next request as any other would, so whether a refusal came
  // before or after the body shows nowhere (every 401 alike); cut short, it cannot.
  if (!req.complete) {
    await drain(req);
    if (!req.complete) out.connection = "close";
  }
  res.writeHead(response.status, out);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  for (;;) {
    // A body that fails midway (a stream its target cut) cuts the caller's connection: ending
    // the answer cleanly would pass a truncated one for a whole one.
    const read = await reader.read().catch(() => null);
    if (!read) return res.destroy();
    if (read.done) break;
    if (!res.write(read.value)) await drainedOrClosed(res);
    // The caller left: stop reading, and let the body know (a stream's upstream call ends).
    if (res.destroyed) return reader.cancel();
  }
  res.end();
}

/** Resolves once `res` can take more, or once it closed (then 'drain' never comes). */
function drainedOrClosed(res: ServerResponse): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** Methods fetch refuses to carry: refused here, as a web Request would refuse them. */
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);

/**
 * The call the handler sees, built without a web Request or stream (`InboundRequest` says why).
 * Only an origin-form target (`/path`) is relayed: the project comes from the Host header, which
 * the handler checks; an absolute-form or `*` target, or a method fetch refuses to carry, is
 * refused here.
 */
function toRequest(req: IncomingMessage, signal: AbortSignal): InboundRequest | RelayError {
  const target = req.url ?? "/";
  // The URL's host is a placeholder: a Host header may be anything, and the handler reads it.
  const url = `http://edge.invalid${target}`;
  if (!target.startsWith("/") || !URL.canParse(url)) {
    return new RelayError("bad_request", NOT_A_PATH);
  }
  const method = req.method ?? "GET";
  if (FORBIDDEN_METHODS.has(method)) {
    return new RelayError("method_not_allowed", "only POST is relayed");
  }
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const hasBody = method !== "GET" && method !== "HEAD";
  return { method, url, headers, signal, body: hasBody ? bodyOf(req) : null };
}

/**
 * The body as chunks, read in paused mode: what has arrived is taken at once (a small body has,
 * by the time the handler reads it), and only a body still arriving is waited for. Until the
 * first read, and once stopped early (a 413, an answer before the body), no listener is left
 * on it, so `drain` can empty it for the caller to read the answer.
 */
function bodyOf(req: IncomingMessage): AsyncIterable<Uint8Array> {
  let wake = () => {};
  const arrived = () => wake();
  let listening = false;
  const stop = () => {
    listening = false;
    req.off("readable", arrived);
    req.off("close", arrived);
  };
  const next = async (): Promise<IteratorResult<Uint8Array>> => {
    if (!listening) {
      listening = true;
      req.on("readable", arrived);
      req.on("close", arrived);
    }
    for (;;) {
      const chunk: Buffer | null = req.read();
      if (chunk)
        return {
          done: false,
          value: new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength),
        };
      if (req.complete) {
        stop();
        return { done: true, value: undefined };
      }
      if (req.destroyed) {
        stop();
        throw new Error("the caller hung up");
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  };
  const early = async (): Promise<IteratorResult<Uint8Array>> => {
    stop();
    return { done: true, value: undefined };
  };
  return { [Symbol.asyncIterator]: () => ({ next, return: early }) };
}

/**
 * What `drain` reads of an unread body at most, in bytes and in time, and how long it waits for
 * the next bytes: a caller still writing keeps them coming; a stalled one (a 408) is not waited on.
 */
const DRAIN_BYTES = 64 * 1024 * 1024;
const DRAIN_MS = 5_000;
const DRAIN_IDLE_MS = 250;

/** Reads and drops the rest of the body, within DRAIN_BYTES, DRAIN_MS and DRAIN_IDLE_MS. */
function drain(req: IncomingMessage): Promise<void> {
  return new Promise((done) => {
    let read = 0;
    const finish = () => {
      clearTimeout(total);
      clearTimeout(idle);
      req.off("data", count);
      done();
    };
    const total = setTimeout(finish, DRAIN_MS);
    let idle = setTimeout(finish, DRAIN_IDLE_MS);
    const count = (chunk: Buffer) => {
      read += chunk.byteLength;
      if (read > DRAIN_BYTES) return finish();
      clearTimeout(idle);
      idle = setTimeout(finish, DRAIN_IDLE_MS);
    };
    // Nothing reads the body stream any more: its listener would only buffer what is dropped.
    req.removeAllListeners("data");
    req.on("data", count);
    req.once("end", finish);
    req.once("close", finish);
    req.resume();
  });
}
