/**
 * One listener for Connect, gRPC, gRPC-Web and REST. Cleartext gRPC needs HTTP/2 (h2c) while
 * browsers and curl speak HTTP/1.1, so each connection is handed to the HTTP/2 or the HTTP/1
 * server by its first bytes: HTTP/2 opens with the "PRI * HTTP/2.0" preface.
 */
import { createServer as createHttp1Server } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { ControlApp } from "./app.ts";
import { relayInterceptor, relayRoutes } from "./connect.ts";
import { panelHandler } from "./panel.ts";
import { restHandler } from "./rest.ts";

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0");

export function createControlServer(app: ControlApp): Server {
  const api = connectNodeAdapter({
    routes: relayRoutes(app),
    interceptors: [relayInterceptor(app)],
    fallback: restHandler(app),
  });
  const panel = panelHandler();
  // The browser panel's pages first: none of its paths is an API path.
  const handler: typeof api = (req, res) => {
    panel(req, res).then(
      (answered) => answered || api(req, res),
      () => api(req, res),
    );
  };
  const http1 = createHttp1Server(handler);
  const http2 = createHttp2Server(handler);
  const server = createNetServer((socket: Socket) => {
    socket.once("data", (first: Buffer) => {
      socket.pause();
      const length = Math.min(first.length, HTTP2_PREFACE.length);
      if (first.subarray(0, length).equals(HTTP2_PREFACE.subarray(0, length))) {
        http2.emit("connection", replaying(socket, first));
      } else {
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
