/**
 * One listener for Connect, gRPC, gRPC-Web and REST. Cleartext gRPC needs HTTP/2 (h2c) while
 * browsers and curl speak HTTP/1.1, so each connection is handed to the HTTP/2 or the HTTP/1
 * server by its first bytes: HTTP/2 opens with the "PRI * HTTP/2.0" preface. A connection that
 * says nothing, or too little, is closed: it must send its first request (HTTP/2) or its request
 * head (HTTP/1) within `headTimeoutMs`.
 */
import { createServer as createHttp1Server } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { ControlApp } from "./app.ts";
import { codecHandler } from "./codec.ts";
import { type MessageLimits, relayInterceptor, relayRoutes } from "./connect/index.ts";
import { malformedMessageIsInvalidArgument } from "./errors.ts";
import { panelHandler } from "./panel.ts";
import { restHandler } from "./rest/router.ts";

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0");
/** An HTTP/1 request's body must have arrived within this (node:http's default is 5 minutes). */
const REQUEST_TIMEOUT_MS = 60_000;

/**
 * On every answer, set before anything is written: no browser sniffs an answer into a page or
 * frames one, and no cache keeps one, since several carry a secret shown once (a key, a member
 * token, a signing or notification secret) and API clients expect fresh answers anyway. The
 * panel's pages replace the policy and the caching with their own (control/panel.ts).
 */
const answerHeaders = {
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
  "cache-control": "no-store",
};

export interface ServerLimits extends MessageLimits {
  /** How long a new connection may take to send its first request's head. */
  headTimeoutMs: number;
}

export const defaultServerLimits: ServerLimits = {
  headTimeoutMs: 10_000,
  managementBytes: 1024 * 1024,
  edgeBytes: 5 * 1024 * 1024,
};

export function createControlServer(app: ControlApp, limits = defaultServerLimits): Server {
  const api = connectNodeAdapter({
    routes: (router) => {
      relayRoutes(app, limits)(router);
      router.handlers.forEach((handler, i) => {
        router.handlers[i] = malformedMessageIsInvalidArgument(handler);
      });
    },
    interceptors: [relayInterceptor(app)],
    fallback: restHandler(app, limits.managementBytes),
    readMaxBytes: limits.managementBytes,
  });
  const panel = panelHandler();
  const codec = codecHandler(app.codec);
  // The codec endpoint's and the browser panel's paths first: none of them is an API path.
  const handler: typeof api = (req, res) => {
    for (const [name, value] of Object.entries(answerHeaders)) res.setHeader(name, value);
    codec(req, res)
      .then((answered) => answered || panel(req, res))
      .then(
        (answered) => answered || api(req, res),
        () => api(req, res),
      )
      // connect-node parses the URL before anything can refuse it, and throws on a Host it
      // cannot parse (an empty one): unhandled, that ended the process.
      .catch(() => {
        if (res.headersSent) return void res.destroy();
        res.writeHead(400, { "content-type": "application/json" });
        res.end('{"error":{"code":"bad_request","message":"malformed request"}}');
      });
  };
  const http1 = createHttp1Server(
    {
      headersTimeout: limits.headTimeoutMs,
      requestTimeout: REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.min(1000, limits.headTimeoutMs),
    },
    handler,
  );
  // Node enforces those timeouts on the connections it tracks, and starts tracking when the
  // server listens; this one never listens (it is handed connections), so start it here.
  http1.emit("listening");
  const http2 = createHttp2Server(handler);
  const server = createNetServer((socket: Socket) => {
    const silent = () => socket.destroy();
    socket.setTimeout(limits.headTimeoutMs, silent);
    socket.once("data", (first: Buffer) => {
      socket.pause();
      const length = Math.min(first.length, HTTP2_PREFACE.length);
      if (first.subarray(0, length).equals(HTTP2_PREFACE.subarray(0, length))) {
        // The session is created, and announced, synchronously within `emit("connection")`;
        // once it carries a request the connection has proven itself, and may idle (a gRPC
        // channel does, and a call may wait silently for a revoke's leases).
        http2.once("session", (session) =>
          session.once("stream", () => socket.setTimeout(0).off("timeout", silent)),
        );
        http2.emit("connection", replaying(socket, first));
      } else {
        // From here on, node:http's own head, request and keep-alive timeouts apply.
        socket.setTimeout(0).off("timeout", silent);
        socket.unshift(first);
        http1.emit("connection", socket);
        socket.resume();
      }
    });
    socket.on("error", () => socket.destroy());
  });
  server.on("close", () => {
    http1.close();
    http2.close();
  });
  return server;
}

/**
 * The socket as a stream that first yields the bytes already read. HTTP/2 sessions read from a
 * socket's native handle, which `unshift` cannot reach, so they get this stream instead.
 */
function replaying(socket: Socket, first: Buffer): Duplex {
  const stream = new Duplex({
    read: () => socket.resume(),
    write: (chunk, encoding, done) => socket.write(chunk, encoding, done),
    final: (done) => socket.end(done),
    destroy: (error, done) => {
      socket.destroy(error ?? undefined);
      done(error);
    },
  });
  stream.push(first);
  socket.on("data", (chunk) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("close", () => stream.destroy());
  return stream;
}
