/**
 * A TCP load balancer on loopback, as a cluster's clients find Temporal's frontends behind one
 * address: each connection goes to the next upstream in turn, and to the one after it when that
 * one does not take it (a node killed), so clients reconnect through it to a node still up.
 * Bytes pass as they come (gRPC's HTTP/2 and the HTTP API alike); nothing is parsed.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface Balancer {
  port: number;
  close(): Promise<void>;
}

export async function startBalancer(port: number, upstreams: readonly number[]): Promise<Balancer> {
  let next = 0;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  };
  const server: Server = createServer((client) => {
    track(client);
    client.pause();
    const first = next++ % upstreams.length;
    const connect = (tried: number) => {
      if (tried === upstreams.length) return client.destroy();
      const upstream = createConnection({
        host: "127.0.0.1",
        port: upstreams[(first + tried) % upstreams.length] as number,
      });
      let connected = false;
      upstream.once("error", () => {
        if (!connected) connect(tried + 1);
      });
      upstream.once("connect", () => {
        connected = true;
        track(upstream);
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
        upstream.on("close", () => client.destroy());
        client.on("close", () => upstream.destroy());
        client.pipe(upstream).pipe(client);
        client.resume();
      });
    };
    connect(0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
