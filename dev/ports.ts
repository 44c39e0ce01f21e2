import { createServer } from "node:net";

/** Ports the OS says are free now; held together so none is handed out twice. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Whether nothing listens on 127.0.0.1:`port` right now. */
export async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * The low ports this process handed out: free when chosen, they may stay unbound a while (a
 * stack's control plane binds its port after its Temporal server chose its own), so none is
 * handed out twice.
 */
const handedOut = new Set<number>();

/**
 * Free ports below 32768, where Linux's ephemeral range starts: for listeners that bind a while
 * after the ports are chosen (a stack's processes), since no outbound connection takes one of
 * these meanwhile; and Temporal's server stores each service's membership port in a SMALLINT
 * column (cluster_membership.rpc_port).
 */
export async function freeLowPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const port = 10_000 + Math.floor(Math.random() * 22_768);
    if (handedOut.has(port) || !(await portFree(port))) continue;
    handedOut.add(port);
    ports.push(port);
  }
  return ports;
}
