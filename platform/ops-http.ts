/**
 * The ops handler (core/ops.ts) on node:http: the control plane answers it beside its REST
 * routes, and the worker beside the sync calls edges hand it (workflows/sync-calls.ts). Also the
 * log and registry both processes start from.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import pino from "pino";
import { collectDefaultMetrics, Registry } from "prom-client";
import { isOpsPath, type OpsHandler, opsMethodNotAllowed, PROXY_HEADERS } from "../core/ops.ts";

/** What this needs of node:http's and connect-node's (HTTP/1 or HTTP/2) request and response. */
interface NodeRequest {
  method?: string | undefined;
  url?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  socket: { remoteAddress?: string | undefined };
}
interface NodeResponse {
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body: string): unknown;
}

/** Answers a request for an ops path; false when the request is not one (the caller's own). */
export async function answerOps(
  ops: OpsHandler,
  req: NodeRequest,
  res: NodeResponse,
): Promise<boolean> {
  const url = `http://relay${req.url ?? "/"}`;
  if (!isOpsPath(URL.parse(url)?.pathname ?? "")) return false;
  // A web Request cannot carry every method (TRACE, CONNECT): refused here, before one is made.
  const method = req.method ?? "GET";
  const answer =
    method === "GET"
      ? await ops(requestOf(url, req), req.socket.remoteAddress ?? "")
      : opsMethodNotAllowed(method);
  if (!answer) return false;
  res.writeHead(answer.status, Object.fromEntries(answer.headers));
  res.end(await answer.text());
  return true;
}

/** The headers the ops handler reads: the token, and whether a proxy passed the request on. */
function requestOf(url: string, req: NodeRequest): Request {
  const headers = new Headers();
  for (const name of ["authorization", ...PROXY_HEADERS]) {
    const value = req.headers[name];
    if (value !== undefined) headers.set(name, String(value));
  }
  return new Request(url, { headers });
}

/**
 * A listener that answers the ops paths, then `route`'s (true when it took the request), and
 * 404s everything else.
 */
export function serveOps(
  ops: OpsHandler,
  route?: (req: IncomingMessage, res: ServerResponse) => boolean,
): Server {
  return createServer((req, res) => {
    if (route?.(req, res)) return;
    void answerOps(ops, req, res).then((answered) => {
      if (answered) return;
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":{"code":"not_found","message":"only /healthz, /readyz and /metrics"}}');
    });
  });
}

/**
 * A Node process's log (one JSON line per event) and metrics registry, with Node's own process
 * metrics in it. `service` names the process in every log line.
 */
export function processTelemetry(service: string) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return { log: pino({ base: { service } }), registry };
}
