/** The edge on Node.js. */
import { Agent, fetch as undiciFetch } from "undici";
import { newId } from "../core/secrets.ts";
import { serveNode, sha256 } from "./adapters/node.ts";
import { createEdge } from "./app.ts";
import { loadEdgeConfig } from "./config.ts";
import { connectControlPlane } from "./control.ts";
import { EdgeState } from "./state.ts";
import { temporalHttpStarter } from "./temporal.ts";

const config = loadEdgeConfig(process.env);
// One keep-alive pool for the control plane and Temporal's HTTP API.
const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 128 });
const pooledFetch = ((input: string | URL | Request, init?: RequestInit) =>
  undiciFetch(input as string, { ...(init as object), dispatcher })) as unknown as typeof fetch;

const state = new EdgeState({
  control: connectControlPlane({
    baseUrl: config.RELAY_CONTROL_URL,
    edgeToken: config.RELAY_EDGE_TOKEN,
    fetch: pooledFetch,
  }),
  edgeId: config.RELAY_EDGE_ID ?? newId("edge"),
  leaseMs: config.RELAY_EDGE_LEASE_MS,
});
await state.start();

const handler = createEdge({
  state,
  hashKey: sha256,
  fetch: pooledFetch,
  temporal: temporalHttpStarter({
    baseUrl: config.TEMPORAL_HTTP_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    apiKey: config.TEMPORAL_API_KEY,
    fetch: pooledFetch,
  }),
  newRequestId: () => newId("req"),
  maxBodyBytes: config.RELAY_MAX_BODY_BYTES,
  bodyTimeoutMs: config.RELAY_BODY_TIMEOUT_MS,
  trustedProxies: config.RELAY_TRUSTED_PROXIES,
});

const server = serveNode(handler);
server.listen(config.RELAY_EDGE_PORT, config.RELAY_EDGE_HOST, () => {
  console.log(
    JSON.stringify({
      msg: "edge listening",
      url: `http://${config.RELAY_EDGE_HOST}:${config.RELAY_EDGE_PORT}`,
    }),
  );
});
const shutdown = () => {
  state.stop();
  server.close(() => process.exit(0));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
