/**
 * What every process answers for its operators, as one web-standard handler: `GET /healthz`
 * (the process is alive), `GET /readyz` (its dependencies answer) and `GET /metrics`
 * (Prometheus text). Metrics name endpoints and projects, so they are not for the public: they
 * need the metrics token when one is set, and otherwise come only to loopback peers that are not
 * a proxy passing a request on.
 */
import { type Cidr, cidrContains, parseCidr, parseIp } from "./ip.ts";
import { hashSecret, timingSafeEqual } from "./secrets.ts";

export interface OpsOptions {
  /** Each dependency's check: resolves when it answers, throws (with why) when not. */
  checks: Record<string, () => Promise<void>>;
  /**
   * Checks that name a problem without making the process unready: it still serves, degraded
   * (200, `status: "degraded"`). A load balancer that pulled it would only refuse more.
   */
  advisories?: Record<string, () => Promise<void>>;
  metrics: () => Promise<string>;
  metricsContentType: string;
  /** When set, /metrics needs `Authorization: Bearer <token>`. */
  metricsToken?: string | undefined;
}

const LOOPBACK = ["127.0.0.0/8", "::1/128"].map((c) => parseCidr(c) as Cidr);
/** What a reverse proxy adds to the requests it passes on (nginx, Caddy, Traefik, Envoy...). */
export const PROXY_HEADERS = ["forwarded", "x-forwarded-for", "x-real-ip"];
const CHECK_TIMEOUT_MS = 2000;

/** What the ops paths read of a request: any runtime's Request, or the edge's `InboundRequest`. */
export type OpsRequest = Pick<Request, "method" | "url" | "headers">;

export type OpsHandler = (request: OpsRequest, peer: string) => Promise<Response | null>;

const OPS_PATHS = new Set(["/healthz", "/readyz", "/metrics"]);

/** Whether `pathname` is one of the ops paths, which take GET only. */
export const isOpsPath = (pathname: string) => OPS_PATHS.has(pathname);

/** An ops path asked with another method than GET: 405, saying which it takes. */
export function opsMethodNotAllowed(method: string): Response {
  const answer = json(405, {
    error: { code: "method_not_allowed", message: `${method} is not allowed here` },
  });
  answer.headers.set("allow", "GET");
  return answer;
}

/** Answers the three ops paths; null for any other request, which is the process's own. */
export function opsHandler(options: OpsOptions): OpsHandler {
  // Compared as hashes, so neither the token's bytes nor its length show in the timing.
  const tokenHash = options.metricsToken ? hashSecret(options.metricsToken) : null;
  return async (request, peer) => {
    const { pathname } = new URL(request.url);
    if (!isOpsPath(pathname)) return null;
    if (request.method !== "GET") return opsMethodNotAllowed(request.method);
    switch (pathname) {
      case "/healthz":
        return json(200, { status: "ok" });
      case "/readyz":
        return readiness(options.checks, options.advisories ?? {});
      case "/metrics": {
        if (!(await metricsAllowed(request, peer, tokenHash))) {
          return json(403, { error: { code: "forbidden", message: "metrics need the token" } });
        }
        return new Response(await options.metrics(), {
          headers: { "content-type": options.metricsContentType },
        });
      }
      default:
        return null;
    }
  };
}

async function metricsAllowed(
  request: OpsRequest,
  peer: string,
  tokenHash: Promise<Uint8Array> | null,
): Promise<boolean> {
  if (!tokenHash) {
    // A same-host proxy connects from loopback on behalf of anyone: its requests are not local.
    if (PROXY_HEADERS.some((name) => request.headers.has(name))) return false;
    const ip = parseIp(peer);
    return ip !== null && LOOPBACK.some((cidr) => cidrContains(cidr, ip));
  }
  const presented = /^Bearer\s+(\S+)$/i.exec(request.headers.get("authorization") ?? "")?.[1];
  return presented !== undefined && timingSafeEqual(await hashSecret(presented), await tokenHash);
}

async function readiness(
  checks: OpsOptions["checks"],
  advisories: NonNullable<OpsOptions["advisories"]>,
): Promise<Response> {
  const [required, advised] = await Promise.all([outcomes(checks), outcomes(advisories)]);
  const ready = required.every(([, outcome]) => outcome === "ok");
  const degraded = advised.some(([, outcome]) => outcome !== "ok");
  return json(ready ? 200 : 503, {
    status: !ready ? "unavailable" : degraded ? "degraded" : "ready",
    checks: Object.fromEntries([...required, ...advised]),
  });
}

/** Each check's "ok", or why not. */
function outcomes(checks: OpsOptions["checks"]): Promise<(readonly [string, string])[]> {
  return Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      try {
        await withTimeout(check(), CHECK_TIMEOUT_MS);
        return [name, "ok"] as const;
      } catch (cause) {
        return [name, cause instanceof Error ? cause.message : String(cause)] as const;
      }
    }),
  );
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}
