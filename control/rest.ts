/**
 * The management API as REST JSON (docs/design.md's table). Every route calls the same operation
 * as its Connect twin; errors leave through `toHttpError` only.
 */
import { Readable } from "node:stream";
import type { connectNodeAdapter } from "@connectrpc/connect-node";
import { z } from "zod";
import { RelayError } from "../core/errors.ts";
import { opsHandler } from "../core/ops.ts";
import { readCapped, TOO_LARGE } from "../core/read-capped.ts";
import { answerOps } from "../platform/ops-http.ts";
import { postgresAnswers } from "../store/db.ts";
import * as cancel from "./api/cancel.ts";
import * as circuits from "./api/circuits.ts";
import type { Ctx } from "./api/context.ts";
import * as credits from "./api/credits.ts";
import * as deliveries from "./api/deliveries.ts";
import * as failures from "./api/failures.ts";
import * as keys from "./api/keys.ts";
import * as notifications from "./api/notifications.ts";
import * as projects from "./api/projects.ts";
import * as requests from "./api/requests.ts";
import * as routing from "./api/routing.ts";
import * as signing from "./api/signing.ts";
import { parseInput } from "./api/validation.ts";
import type { ControlApp } from "./app.ts";
import { authenticate, requireAdmin } from "./auth.ts";
import { toHttpError } from "./errors.ts";
import { observeCall, registry } from "./observability.ts";

/** The request and response types of connect-node's handlers, whose fallback this is. */
type NodeHandler = NonNullable<Parameters<typeof connectNodeAdapter>[0]["fallback"]>;
type Request = Parameters<NodeHandler>[0];
type Response = Parameters<NodeHandler>[1];

interface Call {
  app: ControlApp;
  ctx: Ctx;
  params: Record<string, string>;
  body: unknown;
  query: Record<string, string>;
}

interface Route {
  method: string;
  /** `METHOD /path/:param`, the route's name in metrics. */
  name: string;
  pattern: RegExp;
  status: number;
  handle: (call: Call) => Promise<unknown>;
}

/** `/projects/:project/keys` → a RegExp with named groups. */
function route(
  method: string,
  path: string,
  handle: Route["handle"],
  status = method === "POST" ? 201 : 200,
): Route {
  const pattern = new RegExp(`^${path.replace(/:(\w+)/g, "(?<$1>[^/]+)")}$`);
  return { method, name: `${method} ${path}`, pattern, status, handle };
}

const base = "/projects/:project";
const routes: Route[] = [
  route("POST", "/projects", ({ ctx, body }) => projects.createProject(ctx, body)),
  route("GET", "/projects", ({ ctx }) =>
    projects.listProjects(ctx).then((memberships) => ({ projects: memberships })),
  ),
  route("GET", base, ({ ctx, params }) => projects.getProject(ctx, p(params).project)),
  route("GET", `${base}/members`, ({ ctx, params }) =>
    projects.listMembers(ctx, p(params).project).then((members) => ({ members })),
  ),
  route("POST", `${base}/members`, ({ ctx, params, body }) =>
    projects.addMember(ctx, p(params).project, body),
  ),
  route(
    "DELETE",
    `${base}/members/:memberId`,
    ({ ctx, params }) => projects.removeMember(ctx, p(params).project, p(params).memberId),
    204,
  ),
  route("GET", `${base}/policy`, ({ ctx, params }) => projects.getPolicy(ctx, p(params).project)),
  route("PUT", `${base}/policy`, ({ ctx, params, body }) =>
    projects.updatePolicy(ctx, p(params).project, body),
  ),
  route("GET", `${base}/notifications`, ({ ctx, params }) =>
    notifications.getNotifications(ctx, p(params).project),
  ),
  route("PUT", `${base}/notifications`, ({ ctx, params, body }) =>
    notifications.setNotifications(ctx, p(params).project, body),
  ),
  route("POST", `${base}/notifications/rotate-secret`, ({ ctx, params }) =>
    notifications.rotateNotificationSecret(ctx, p(params).project),
  ),
  route(
    "DELETE",
    `${base}/notifications`,
    ({ ctx, params }) => notifications.deleteNotifications(ctx, p(params).project),
    204,
  ),
  route("GET", `${base}/lines`, ({ ctx, params }) =>
    routing.listLines(ctx, p(params).project).then((lines) => ({ lines })),
  ),
  route("POST", `${base}/lines`, ({ ctx, params, body }) =>
    routing.createLine(ctx, p(params).project, body),
  ),
  route(
    "DELETE",
    `${base}/lines/:line`,
    ({ ctx, params }) => routing.deleteLine(ctx, p(params).project, p(params).line),
    204,
  ),
  route("GET", `${base}/lines/:line/endpoints`, ({ ctx, params }) =>
    routing
      .listEndpoints(ctx, p(params).project, p(params).line)
      .then((endpoints) => ({ endpoints })),
  ),
  route("POST", `${base}/lines/:line/endpoints`, ({ ctx, params, body }) =>
    routing.createEndpoint(ctx, p(params).project, p(params).line, body),
  ),
  route("GET", `${base}/lines/:line/endpoints/:path`, ({ ctx, params }) =>
    routing.getEndpoint(ctx, p(params).project, p(params).line, p(params).path),
  ),
  route("PUT", `${base}/lines/:line/endpoints/:path`, ({ ctx, params, body }) =>
    routing.updateEndpoint(ctx, p(params).project, p(params).line, p(params).path, body),
  ),
  route(
    "DELETE",
    `${base}/lines/:line/endpoints/:path`,
    ({ ctx, params }) =>
      routing.deleteEndpoint(ctx, p(params).project, p(params).line, p(params).path),
    204,
  ),
  route("GET", `${base}/lines/:line/endpoints/:path/circuits`, ({ ctx, params }) =>
    circuits.getCircuits(ctx, p(params).project, endpointRef(params)),
  ),
  ...([true, false] as const).flatMap((paused) => {
    const action = paused ? "pause" : "resume";
    return [
      route(
        "POST",
        `${base}/lines/:line/endpoints/:path/${action}`,
        ({ ctx, params }) =>
          circuits.pauseEndpoint(ctx, p(params).project, endpointRef(params), paused),
        200,
      ),
      route(
        "POST",
        `${base}/lines/:line/endpoints/:path/targets/:target/${action}`,
        ({ ctx, params }) =>
          circuits.pauseTarget(
            ctx,
            p(params).project,
            endpointRef(params),
            p(params).target,
            paused,
          ),
        200,
      ),
    ];
  }),
  route(
    "POST",
    `${base}/lines/:line/endpoints/:path/targets/:target/enable`,
    ({ ctx, params }) =>
      circuits.enableTarget(ctx, p(params).project, endpointRef(params), p(params).target),
    200,
  ),
  route(
    "POST",
    `${base}/lines/:line/endpoints/:path/signing-secret/rotate`,
    ({ ctx, params, body }) =>
      signing.rotateSigningSecret(ctx, p(params).project, p(params).line, p(params).path, body),
  ),
  route("GET", `${base}/keys`, ({ ctx, params }) =>
    keys.listKeys(ctx, p(params).project).then((list) => ({ keys: list })),
  ),
  route("POST", `${base}/keys`, ({ ctx, params, body }) =>
    keys.mintKey(ctx, p(params).project, body),
  ),
  route("POST", `${base}/keys/:keyId/rotate`, ({ ctx, params }) =>
    keys.rotateKey(ctx, p(params).project, p(params).keyId),
  ),
  route(
    "DELETE",
    `${base}/keys/:keyId`,
    ({ ctx, params }) =>
      keys.revokeKey(ctx, p(params).project, p(params).keyId).then((key) => ({ key })),
    200,
  ),
  route(
    "POST",
    `${base}/keys/:keyId/reveal-successor`,
    ({ ctx, params }) => keys.revealSuccessor(ctx, p(params).project, p(params).keyId),
    200,
  ),
  route("GET", `${base}/usage`, ({ ctx, params }) => credits.getUsage(ctx, p(params).project)),
  route("GET", `${base}/usage/deliveries`, ({ ctx, params, query }) =>
    deliveries.deliveryHistory(ctx, p(params).project, query).then((hours) => ({ hours })),
  ),
  route(
    "POST",
    `${base}/credits`,
    ({ ctx, params, body }) => credits.addCredits(ctx, p(params).project, body),
    200,
  ),
  route("GET", `${base}/failures`, ({ ctx, params, query }) =>
    failures.listFailures(ctx, p(params).project, query),
  ),
  route(
    "POST",
    `${base}/failures/replay`,
    ({ ctx, params, body }) => failures.replayFailures(ctx, p(params).project, body),
    202,
  ),
  route(
    "POST",
    `${base}/requests/:requestId/replay`,
    ({ ctx, params }) => failures.replayRequest(ctx, p(params).project, p(params).requestId),
    202,
  ),
  route("GET", `${base}/requests`, ({ ctx, params, query }) =>
    requests.listRequests(ctx, p(params).project, query),
  ),
  route("GET", `${base}/requests/:requestId`, ({ ctx, params }) =>
    requests.getRequest(ctx, p(params).project, p(params).requestId),
  ),
  route("DELETE", `${base}/requests/:requestId`, ({ ctx, params }) =>
    cancel.cancelRequest(ctx, p(params).project, p(params).requestId),
  ),
  route(
    "POST",
    "/admin/clock",
    async ({ app, ctx, body }) => {
      devOnly(app, ctx);
      const { advanceSeconds } = parseInput(
        z.strictObject({ advanceSeconds: z.number().finite() }),
        body,
      );
      const offsetMs = await app.clock.advance(advanceSeconds);
      return { now: app.clock.now(), offsetMs };
    },
    200,
  ),
  route(
    "POST",
    "/admin/rotation/run",
    async ({ app, ctx }) => {
      devOnly(app, ctx);
      return { rotated: await app.runRotation() };
    },
    200,
  ),
];

/** The dev-clock routes do not exist unless RELAY_DEV_CLOCK=1, and then only for the admin. */
function devOnly(app: ControlApp, ctx: Ctx): void {
  if (!app.devClock) throw new RelayError("not_found", "no such route");
  requireAdmin(ctx.caller);
}

/** Route parameters (see `decodeParam`); a route only runs when its groups matched. */
function p(params: Record<string, string>) {
  return params as Record<
    "project" | "line" | "path" | "target" | "requestId" | "keyId" | "memberId",
    string
  >;
}

/** The endpoint a route's path names. */
const endpointRef = (params: Record<string, string>) => ({
  line: p(params).line,
  path: p(params).path,
});

/**
 * A path segment or query value, URL-decoded. A malformed escape or a control character (NUL,
 * which Postgres cannot store in text) is the caller's mistake: 400 before any lookup.
 */
function decodeParam(name: string, raw: string, decode: (raw: string) => string): string {
  let value: string;
  try {
    value = decode(raw);
  } catch {
    throw new RelayError("bad_request", `${name}: malformed percent-encoding`);
  }
  if (/\p{Cc}/u.test(value)) throw new RelayError("bad_request", `${name}: control character`);
  return value;
}

export function restHandler(app: ControlApp, maxBodyBytes: number) {
  const { deps, credentials } = app;
  const ops = opsHandler({
    checks: { postgres: () => postgresAnswers(deps.sql) },
    metrics: () => registry.metrics(),
    metricsContentType: registry.contentType,
    metricsToken: app.metricsToken,
  });
  return async function handleRest(req: Request, res: Response): Promise<void> {
    const started = performance.now();
    let status = 200;
    let body: string | undefined;
    let routeName = "unmatched";
    try {
      const url = URL.parse(req.url ?? "/", "http://control");
      if (!url) throw new RelayError("bad_request", "malformed request target");
      if (await answerOps(ops, req, res)) return;
      const matches = routes
        .map((r) => ({ r, match: r.pattern.exec(url.pathname) }))
        .filter((m) => m.match !== null);
      if (matches.length === 0) throw new RelayError("not_found", `no route ${url.pathname}`);
      const found = matches.find((m) => m.r.method === req.method);
      if (!found?.match) {
        throw new RelayError("method_not_allowed", `${req.method} is not allowed here`);
      }
      routeName = found.r.name;
      const caller = await authenticate(deps.sql, credentials, req.headers.authorization);
      const params = Object.fromEntries(
        Object.entries(found.match.groups ?? {}).map(([k, v]) => [
          k,
          decodeParam(k, v, decodeURIComponent),
        ]),
      );
      const query = Object.fromEntries(
        [...url.searchParams].map(([k, v]) => [k, decodeParam(k, v, String)]),
      );
      const result = await found.r.handle({
        app,
        ctx: { ...deps, caller },
        params,
        body:
          req.method === "GET" || req.method === "DELETE"
            ? undefined
            : await readJson(req, maxBodyBytes),
        query,
      });
      status = found.r.status;
      body = status === 204 ? undefined : JSON.stringify(result);
    } catch (cause) {
      ({ status, body } = toHttpError(cause));
    }
    res.writeHead(status, body === undefined ? {} : { "content-type": "application/json" });
    res.end(body ?? "");
    observeCall("rest", routeName, status, (performance.now() - started) / 1000);
  };
}

/**
 * The body as JSON, at most `maxBytes` of it. Bodies are never decompressed: a compressed one is
 * refused before it is read, as is one whose announced length is over the limit.
 */
async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding.toLowerCase() !== "identity") {
    throw new RelayError("unsupported_media_type", "send the body uncompressed");
  }
  const tooLarge = () => new RelayError("payload_too_large", `body over ${maxBytes} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) throw tooLarge();
  const read = await readCapped(Readable.toWeb(req) as ReadableStream<Uint8Array>, maxBytes);
  if (read === TOO_LARGE) throw tooLarge();
  const text = Buffer.from(read.buffer, read.byteOffset, read.byteLength).toString("utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new RelayError("bad_request", "body is not valid JSON");
  }
}
