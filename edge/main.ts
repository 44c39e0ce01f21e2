/** The edge on Node.js: undici's keep-alive pools for every outbound call, node:crypto's hash, HMAC and AES-GCM. */
import { hmacSha256, nodeAesGcm, sha256 } from "../platform/node-crypto.ts";
import { pooledFetch, pooledWholeFetch } from "../platform/pooled-fetch.ts";
import { machineAddresses, targetCaller, targetDispatcher } from "../platform/targets.ts";
import { nodeTransformPool } from "../platform/transforms.ts";
import { serveNode } from "./adapters/node.ts";
import { bootEdge } from "./boot.ts";

const { config, handler, state, log, logError, finish } = await bootEdge(process.env, {
  fetch: pooledFetch(128),
  wholeFetch: pooledWholeFetch,
  hashKey: sha256,
  hmac: hmacSha256,
  // node:crypto seals in the call's own turn, not on libuv's pool (docs/benchmarks.md, codec).
  aesGcm: nodeAesGcm,
  callTarget: (rules) =>
    targetCaller(targetDispatcher(rules, { keepAliveTimeout: 30_000, connections: 128 })),
  machineAddresses,
  transform: nodeTransformPool().run,
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
  server.close(() => void released.then(finish).finally(() => process.exit(0)));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
