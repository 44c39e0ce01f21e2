/** The edge on Node.js: undici's keep-alive pool for every outbound call, node:crypto's hash and HMAC. */
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { Agent, fetch as undiciFetch } from "undici";
import { machineAddresses, targetCaller, targetDispatcher } from "../platform/targets.ts";
import { hmacSha256, serveNode, sha256 } from "./adapters/node.ts";
import { bootEdge } from "./boot.ts";

/**
 * A fetch on a keep-alive pool of its own: at most `connections` to a host, no cap when unset;
 * trusting the CA in `caFile` as well as the system's roots when given.
 */
function pooledFetch(connections?: number, caFile?: string): typeof fetch {
  const dispatcher = new Agent({
    keepAliveTimeout: 30_000,
    connections: connections ?? null,
    ...(caFile && { connect: { ca: [...rootCertificates, readFileSync(caFile, "utf8")] } }),
  });
  return ((input: string | URL | Request, init?: RequestInit) =>
    undiciFetch(input as string, { ...(init as object), dispatcher })) as unknown as typeof fetch;
}

const { config, handler, state, log, logError, flushTraces } = await bootEdge(process.env, {
  fetch: pooledFetch(128),
  pooledFetch,
  hashKey: sha256,
  hmac: hmacSha256,
  callTarget: (rules) =>
    targetCaller(targetDispatcher(rules, { keepAliveTimeout: 30_000, connections: 128 })),
  machineAddresses,
});
const server = serveNode(handler, logError);
server.listen(config.RELAY_EDGE_PORT, config.RELAY_EDGE_HOST, () => {
  const url = `http://${config.RELAY_EDGE_HOST}:${config.RELAY_EDGE_PORT}`;
  log.info({ runtime: "node", url }, "edge listening");
});
const shutdown = () => {
  // The lease goes back at once: calls still arriving while connections drain get 503, and a
  // caller's retry finds an edge that still follows the control plane's changes.
  const released = state.stop();
  server.close(() => void released.then(flushTraces).finally(() => process.exit(0)));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
