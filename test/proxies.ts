/** A TCP proxy the integration tests put between a process and what it calls, to fail the link. */
import { connect, createServer, type Socket } from "node:net";
import { freePorts } from "../dev/ports.ts";
import { extraEdge, stack } from "./helpers.ts";

/**
 * A TCP proxy (to the control plane, to Temporal) that can drop every connection and refuse new
 * ones (`cut`), or drop them and take new ones without ever answering (`stall`: a peer that
 * hangs).
 */
export async function cuttableProxy(to: URL) {
  const sockets = new Set<Socket>();
  let mode: "open" | "cut" | "stalled" = "open";
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    return socket;
  };
  const server = createServer((client) => {
    if (mode === "cut") return client.destroy();
    track(client);
    if (mode === "stalled") return;
    client.pipe(track(connect(Number(to.port), to.hostname))).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    cut() {
      mode = "cut";
      dropAll();
    },
    stall() {
      mode = "stalled";
      dropAll();
    },
    restore() {
      if (mode === "stalled") dropAll();
      mode = "open";
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** An edge of its own (`extraEdge`, with `env`) that reaches Temporal's HTTP API through a proxy. */
export async function edgeThroughTemporalProxy(name: string, env: Record<string, string> = {}) {
  const temporalHttp = await cuttableProxy(new URL(stack().temporalHttpAddress));
  const [edgePort = 0] = await freePorts(1);
  const edge = extraEdge(name, edgePort, {
    RELAY_ALLOW_PRIVATE_TARGETS: "1",
    TEMPORAL_HTTP_ADDRESS: temporalHttp.url,
    ...env,
  });
  return { edge, temporalHttp, through: { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort } };
}
