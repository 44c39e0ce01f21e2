/**
 * Serves the edge handler with node:http. The caller hanging up aborts the Request's signal,
 * and response bodies are written chunk by chunk as they arrive.
 */

import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { EdgeDeps, EdgeHandler } from "../app.ts";

/** Node's synchronous SHA-256: a few microseconds, where Web Crypto's digest costs tens. */
export function sha256(plaintext: string): Uint8Array {
  return createHash("sha256").update(plaintext).digest();
}

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
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const request = new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, {
    method: req.method ?? "GET",
    headers,
    body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : null,
    signal: abort.signal,
    // @ts-expect-error: Node's fetch needs `duplex` for a streamed body; lib.dom lacks it.
    duplex: "half",
  });
  const response = await handler(request, { remoteAddress: req.socket.remoteAddress ?? "" });
  const out: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    out[name] = name === "set-cookie" ? response.headers.getSetCookie() : value;
  });
  // Answered before the body was read (413, 401...): the socket holds unread bytes, so it
  // cannot carry another request.
  if (!req.complete) out.connection = "close";
  res.writeHead(response.status, out);
  if (!response.body) {
    res.end();
    return;
  }
  for await (const chunk of response.body) {
    if (!res.write(chunk)) await new Promise((resolve) => res.once("drain", resolve));
  }
  res.end();
}
