/**
 * The management API as REST JSON (docs/design.md's table). Every route calls the same operation
 * as its Connect twin; errors leave through `toHttpError` only.
 */
import { Readable } from "node:stream";
import type { connectNodeAdapter } from "@connectrpc/connect-node";
import { z } from "zod";
import { type ErrorCode, RelayError } from "../core/errors.ts";
import { opsHandler } from "../core/ops.ts";
import { readCapped, TOO_LARGE } from "../core/read-capped.ts";
import { answerOps } from "../platform/ops-http.ts";
import { temporalAnswers } from "../platform/temporal.ts";
import { postgresAnswers } from "../store/db.ts";
import * as answers from "./api/answers.ts";
import * as cancel from "./api/cancel.ts";
import * as circuits from "./api/circuits.ts";
import type { Ctx } from "./api/context.ts";
import * as credits from "./api/credits.ts";
import * as deliveries from "./api/deliveries.ts";
import * as failures from "./api/failures.ts";
import * as keys from "./api/keys.ts";
import * as limits from "./api/limits.ts";
import * as notifications from "./api/notifications.ts";
import * as projects from "./api/projects.ts";
import * as requests from "./api/requests.ts";
import * as routing from "./api/routing.ts";
import * as signing from "./api/signing.ts";
import { parseInput } from "./api/validation.ts";
import type { ControlApp } from "./app.ts";
import { authenticate, type Caller, requireAdmin } from "./auth.ts";
import { toHttpError } from "./errors.ts";
import { observeCall, registry } from "./observability.ts";
import { type OpenApiDocument, openApiAnswer, openApiDocument, type Tag } from "./openapi.ts";

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

/** Who may call a route; the OpenAPI document states it as the route's security. */
export type Access = "public" | "member" | "editor" | "owner" | "admin";

/**
 * What a route takes and answers: the OpenAPI document is made of these (control/openapi.ts).
 * Its schemas are the ones its operation parses with and answers by.
 */
export interface Contract<
  Body extends z.ZodType | undefined = z.ZodType | undefined,
  Answer extends z.ZodType | undefined = z.ZodType | undefined,
> {
  /** The operation's name: its Connect RPC's, where it has one. */
  operationId: string;
  summary: string;
  description?: string;
  access: Access;
  query?: z.ZodObject;
  body?: Body;
  /** A body the document shows, checked against the body's schema. */
  example?: Body extends z.ZodType ? z.input<Body> : never;
  /** Absent: the route answers 204 with no body. */
  answer?: Answer;
  /** Otherwise 201 for a POST and 200 for the rest, or 204 without an answer. */
  status?: number;
  /** What it may refuse beyond what every route like it may (`refusalsOf`). */
  errors?: ErrorCode[];
}

export interface Route {
  method: string;
  /** `/projects/:project/keys`: the route's path with its parameters. */
  path: string;
  /** `METHOD /path/:param`, the route's name in metrics. */
  name: string;
  pattern: RegExp;
  tag: Tag;
  contract: Contract;
  status: number;
  /** Every error code it may answer. */
  errors: ErrorCode[];
  handle: (call: Call) => Promise<unknown>;
}

/**
 * A route; its handler must answer its contract's answer schema (in the code's types: Dates where
 * the JSON has ISO strings). `/projects/:project/keys` → a RegExp with named groups.
 */
function route<
  Body extends z.ZodType | undefined,
  Answer extends z.ZodType | undefined = undefined,
>(
  method: string,
  path: string,
  contract: Contract<Body, Answer>,
  handle: (call: Call) => Promise<Answer extends z.ZodType ? z.output<Answer> : void>,
): Omit<Route, "tag"> {
  const pattern = new RegExp(`^${path.replace(/:(\w+)/g, "(?<$1>[^/]+)")}$`);
  const success = contract.answer === undefined ? 204 : method === "POST" ? 201 : 200;
  return {
    method,
    path,
    name: `${method} ${path}`,
    pattern,
    contract,
    status: contract.status ?? success,
    errors: refusalsOf(method, path, contract),
    handle,
  };
}

/**
 * What a route may refuse by how `handleRest` treats it, and its contract's own: any request
 * target or query value may be malformed (400) and anything may fail unexpectedly (500); a token
 * may be wrong or of the wrong kind (401, 403); a project may not be the caller's (404); a body
 * may be compressed or too large (415, 413).
 */
function refusalsOf(method: string, path: string, contract: Contract): ErrorCode[] {
  const codes: ErrorCode[] = ["bad_request", "internal"];
  if (contract.access !== "public") codes.push("unauthenticated", "forbidden");
  if (path.startsWith(base)) codes.push("not_found");
  if (readsBody(method)) codes.push("payload_too_large", "unsupported_media_type");
  return [...new Set([...codes, ...(contract.errors ?? [])])];
}

const readsBody = (method: string) => method !== "GET" && method !== "DELETE";

/** Routes under one tag of the document. */
const tagged = (tag: Tag, list: Omit<Route, "tag">[]): Route[] => list.map((r) => ({ ...r, tag }));

const DEV_CLOCK_ONLY = "Only when the control plane runs with RELAY_DEV_CLOCK=1; otherwise 404.";

const advanceClockBody = z.strictObject({ advanceSeconds: z.number().finite() });

const base = "/projects/:project";
const endpointPath = `${base}/lines/:line/endpoints/:path`;
const targetPath = `${endpointPath}/targets/:target`;

export const routes: Route[] = [
  ...tagged("Projects", [
    route(
      "POST",
      "/projects",
      {
        operationId: "createProject",
        summary: "Create a project with its first owner",
        access: "admin",
        body: projects.createProjectBody,
        example: { slug: "acme", name: "Acme", plan: "paid" },
        answer: answers.createdProject,
        errors: ["conflict"],
      },
      ({ ctx, body }) => projects.createProject(ctx, body),
    ),
    route(
      "GET",
      "/projects",
      {
        operationId: "listProjects",
        summary: "The projects the caller may manage",
        access: "member",
        answer: answers.projectList,
      },
      ({ ctx }) => projects.listProjects(ctx),
    ),
    route(
      "GET",
      base,
      {
        operationId: "getProject",
        summary: "A project, with where it is reached",
        access: "editor",
        answer: answers.projectDetail,
      },
      ({ ctx, params }) => projects.getProject(ctx, p(params).project),
    ),
    route(
      "GET",
      `${base}/limits`,
      {
        operationId: "getProjectLimits",
        summary: "Each of the project's caps and what it uses of it",
        description: "A create that would grow the project past a cap is 409 `limit_exceeded`.",
        access: "editor",
        answer: answers.projectLimits,
      },
      ({ ctx, params }) => limits.getLimits(ctx, p(params).project),
    ),
    route(
      "PUT",
      `${base}/limits`,
      {
        operationId: "setProjectLimits",
        summary: "Set the project's own caps (a cap absent or null is the deployment's default)",
        access: "admin",
        body: limits.limitOverridesBody,
        example: { endpoints: 2000, schemaBytes: 8388608 },
        answer: answers.projectLimits,
      },
      ({ ctx, params, body }) => limits.setLimits(ctx, p(params).project, body),
    ),
  ]),
  ...tagged("Members", [
    route(
      "GET",
      `${base}/members`,
      {
        operationId: "listMembers",
        summary: "The project's members",
        access: "editor",
        answer: answers.memberList,
      },
      ({ ctx, params }) =>
        projects.listMembers(ctx, p(params).project).then((members) => ({ members })),
    ),
    route(
      "POST",
      `${base}/members`,
      {
        operationId: "addMember",
        summary: "Add a member; their token is shown this once",
        access: "owner",
        body: projects.addMemberBody,
        example: { name: "Ada", role: "editor", expiresAt: "2027-01-31T00:00:00Z" },
        answer: answers.addedMember,
        errors: ["limit_exceeded"],
      },
      ({ ctx, params, body }) => projects.addMember(ctx, p(params).project, body),
    ),
    route(
      "POST",
      `${base}/members/:memberId/rotate-token`,
      {
        operationId: "rotateMemberToken",
        summary: "Give a member a new token, shown this once; the old one is refused at once",
        description:
          "A member may rotate its own token, an owner any member's. The expiry stays as it was.",
        access: "editor",
        answer: answers.rotatedMemberToken,
      },
      ({ ctx, params }) => projects.rotateMemberToken(ctx, p(params).project, p(params).memberId),
    ),
    route(
      "DELETE",
      `${base}/members/:memberId`,
      {
        operationId: "removeMember",
        summary: "Remove a member (not yourself, nor the project's last owner)",
        access: "owner",
        errors: ["conflict"],
      },
      ({ ctx, params }) => projects.removeMember(ctx, p(params).project, p(params).memberId),
    ),
  ]),
  ...tagged("Policy", [
    route(
      "GET",
      `${base}/policy`,
      {
        operationId: "getPolicy",
        summary: "The project's key policy",
        access: "editor",
        answer: projects.policyBody,
      },
      ({ ctx, params }) => projects.getPolicy(ctx, p(params).project),
    ),
    route(
      "PUT",
      `${base}/policy`,
      {
        operationId: "updatePolicy",
        summary: "Set the project's key policy",
        access: "owner",
        body: projects.policyBody,
        example: {
          defaultKeyTtlDays: 90,
          maxKeyTtlDays: 365,
          editorsMayCreateNonExpiringKeys: false,
        },
        answer: projects.policyBody,
      },
      ({ ctx, params, body }) => projects.updatePolicy(ctx, p(params).project, body),
    ),
  ]),
  ...tagged("Notifications", [
    route(
      "GET",
      `${base}/notifications`,
      {
        operationId: "getNotifications",
        summary: "The project's notification URL (404 while none is set)",
        access: "editor",
        answer: answers.notifications,
      },
      ({ ctx, params }) => notifications.getNotifications(ctx, p(params).project),
    ),
    route(
      "PUT",
      `${base}/notifications`,
      {
        operationId: "setNotifications",
        summary: "Set the notification URL; the first set answers its secret, once",
        access: "editor",
        body: notifications.notificationsBody,
        example: { url: "https://hooks.example.com/relay-events" },
        answer: answers.notificationsSet,
      },
      ({ ctx, params, body }) => notifications.setNotifications(ctx, p(params).project, body),
    ),
    route(
      "POST",
      `${base}/notifications/rotate-secret`,
      {
        operationId: "rotateNotificationSecret",
        summary: "A new notification secret, shown this once",
        access: "editor",
        answer: answers.notificationsRotated,
      },
      ({ ctx, params }) => notifications.rotateNotificationSecret(ctx, p(params).project),
    ),
    route(
      "DELETE",
      `${base}/notifications`,
      {
        operationId: "deleteNotifications",
        summary: "Stop notifications: the URL and its secret are removed",
        access: "editor",
      },
      ({ ctx, params }) => notifications.deleteNotifications(ctx, p(params).project),
    ),
  ]),
  ...tagged("Lines", [
    route(
      "GET",
      `${base}/lines`,
      {
        operationId: "listLines",
        summary: "The project's lines",
        access: "editor",
        answer: answers.lineList,
      },
      ({ ctx, params }) => routing.listLines(ctx, p(params).project).then((lines) => ({ lines })),
    ),
    route(
      "POST",
      `${base}/lines`,
      {
        operationId: "createLine",
        summary: "Create a line: the first path segment of its endpoints' inbound URLs",
        access: "editor",
        body: routing.createLineBody,
        example: { key: "v2" },
        answer: answers.line,
        errors: ["conflict", "limit_exceeded"],
      },
      ({ ctx, params, body }) => routing.createLine(ctx, p(params).project, body),
    ),
    route(
      "DELETE",
      `${base}/lines/:line`,
      {
        operationId: "deleteLine",
        summary: "Delete a line with its endpoints",
        access: "editor",
      },
      ({ ctx, params }) => routing.deleteLine(ctx, p(params).project, p(params).line),
    ),
  ]),
  ...tagged("Endpoints", [
    route(
      "GET",
      `${base}/lines/:line/endpoints`,
      {
        operationId: "listEndpoints",
        summary: "A line's endpoints with their targets",
        access: "editor",
        answer: answers.endpointList,
      },
      ({ ctx, params }) =>
        routing
          .listEndpoints(ctx, p(params).project, p(params).line)
          .then((endpoints) => ({ endpoints })),
    ),
    route(
      "POST",
      `${base}/lines/:line/endpoints`,
      {
        operationId: "createEndpoint",
        summary: "Create an endpoint; its signing secret is shown this once",
        access: "editor",
        body: routing.createEndpointBody,
        example: {
          path: "orders",
          targets: [{ name: "billing", targetUrl: "https://billing.example.com/hook" }],
          ipAllowlist: [],
        },
        answer: answers.createdEndpoint,
        errors: ["conflict", "limit_exceeded"],
      },
      ({ ctx, params, body }) =>
        routing.createEndpoint(ctx, p(params).project, p(params).line, body),
    ),
    route(
      "GET",
      endpointPath,
      {
        operationId: "getEndpoint",
        summary: "An endpoint with its targets",
        access: "editor",
        answer: answers.endpoint,
      },
      ({ ctx, params }) =>
        routing.getEndpoint(ctx, p(params).project, p(params).line, p(params).path),
    ),
    route(
      "PUT",
      endpointPath,
      {
        operationId: "updateEndpoint",
        summary: "Replace an endpoint's settings (a `path` renames it)",
        access: "editor",
        body: routing.updateEndpointBody,
        example: {
          targets: [
            { name: "billing", targetUrl: "https://billing.example.com/hook", timeoutSeconds: 10 },
          ],
          rateLimit: { requestsPerSecond: 50, burst: 100 },
        },
        answer: answers.endpoint,
        errors: ["conflict", "limit_exceeded"],
      },
      ({ ctx, params, body }) =>
        routing.updateEndpoint(ctx, p(params).project, p(params).line, p(params).path, body),
    ),
    route(
      "DELETE",
      endpointPath,
      {
        operationId: "deleteEndpoint",
        summary: "Delete an endpoint",
        access: "editor",
      },
      ({ ctx, params }) =>
        routing.deleteEndpoint(ctx, p(params).project, p(params).line, p(params).path),
    ),
    route(
      "POST",
      `${endpointPath}/signing-secret/rotate`,
      {
        operationId: "rotateSigningSecret",
        summary: "A new signing secret, shown this once; the old ones sign on for the overlap",
        description: "Answers once every edge signs with the new secret.",
        access: "editor",
        body: signing.rotateSigningSecretBody,
        example: { overlapSeconds: 3600 },
        answer: answers.rotatedSigningSecret,
      },
      ({ ctx, params, body }) =>
        signing.rotateSigningSecret(ctx, p(params).project, p(params).line, p(params).path, body),
    ),
  ]),
  ...tagged("Delivery control", [
    route(
      "GET",
      `${endpointPath}/circuits`,
      {
        operationId: "getCircuits",
        summary: "Each target's circuit: state, pauses, waiting deliveries, recent events",
        access: "editor",
        answer: answers.circuits,
      },
      ({ ctx, params }) => circuits.getCircuits(ctx, p(params).project, endpointRef(params)),
    ),
    ...([true, false] as const).flatMap((paused) => {
      const [action, Action] = paused ? ["pause", "Pause"] : ["resume", "Resume"];
      return [
        route(
          "POST",
          `${endpointPath}/${action}`,
          {
            operationId: `${action}Endpoint`,
            summary: `${Action} every target of an endpoint`,
            access: "editor",
            answer: answers.circuits,
            status: 200,
          },
          ({ ctx, params }) =>
            circuits.pauseEndpoint(ctx, p(params).project, endpointRef(params), paused),
        ),
        route(
          "POST",
          `${targetPath}/${action}`,
          {
            operationId: `${action}Target`,
            summary: `${Action} one target`,
            access: "editor",
            answer: answers.circuits,
            status: 200,
          },
          ({ ctx, params }) =>
            circuits.pauseTarget(
              ctx,
              p(params).project,
              endpointRef(params),
              p(params).target,
              paused,
            ),
        ),
      ];
    }),
    route(
      "POST",
      `${targetPath}/enable`,
      {
        operationId: "enableTarget",
        summary: "Enable a target its circuit disabled",
        access: "editor",
        answer: answers.circuits,
        status: 200,
      },
      ({ ctx, params }) =>
        circuits.enableTarget(ctx, p(params).project, endpointRef(params), p(params).target),
    ),
  ]),
  ...tagged("Keys", [
    route(
      "GET",
      `${base}/keys`,
      {
        operationId: "listKeys",
        summary: "The project's API keys",
        access: "editor",
        answer: answers.keyList,
      },
      ({ ctx, params }) => keys.listKeys(ctx, p(params).project).then((list) => ({ keys: list })),
    ),
    route(
      "POST",
      `${base}/keys`,
      {
        operationId: "mintKey",
        summary: "Mint an API key; its plaintext is shown this once",
        access: "editor",
        body: keys.mintKeyBody,
        example: { name: "backend", mode: "live", ttlDays: 90 },
        answer: answers.issuedKey,
        errors: ["policy_violation", "limit_exceeded"],
      },
      ({ ctx, params, body }) => keys.mintKey(ctx, p(params).project, body),
    ),
    route(
      "POST",
      `${base}/keys/:keyId/rotate`,
      {
        operationId: "rotateKey",
        summary: "A linked successor; the key stays valid until its own expiry",
        access: "editor",
        answer: answers.issuedKey,
        errors: ["key_not_active", "limit_exceeded"],
      },
      ({ ctx, params }) => keys.rotateKey(ctx, p(params).project, p(params).keyId),
    ),
    route(
      "DELETE",
      `${base}/keys/:keyId`,
      {
        operationId: "revokeKey",
        summary: "Revoke a key, with no grace",
        description: "Answers once every edge refuses the key.",
        access: "editor",
        answer: answers.revokedKey,
        errors: ["key_not_active"],
      },
      ({ ctx, params }) =>
        keys.revokeKey(ctx, p(params).project, p(params).keyId).then((key) => ({ key })),
    ),
    route(
      "POST",
      `${base}/keys/:keyId/reveal-successor`,
      {
        operationId: "revealSuccessor",
        summary: "The auto-rotated successor's plaintext, once",
        access: "editor",
        answer: answers.issuedKey,
        status: 200,
        errors: ["successor_already_revealed"],
      },
      ({ ctx, params }) => keys.revealSuccessor(ctx, p(params).project, p(params).keyId),
    ),
  ]),
  ...tagged("Usage", [
    route(
      "GET",
      `${base}/usage`,
      {
        operationId: "getUsage",
        summary: "Credits used and remaining in each pool",
        access: "editor",
        answer: answers.usage,
      },
      ({ ctx, params }) => credits.getUsage(ctx, p(params).project),
    ),
    route(
      "GET",
      `${base}/usage/deliveries`,
      {
        operationId: "getDeliveryHistory",
        summary: "Deliveries and failed attempts per hour, oldest first",
        access: "editor",
        query: deliveries.deliveryHistoryQuery,
        answer: answers.deliveryHistory,
      },
      ({ ctx, params, query }) =>
        deliveries.deliveryHistory(ctx, p(params).project, query).then((hours) => ({ hours })),
    ),
    route(
      "POST",
      `${base}/credits`,
      {
        operationId: "addCredits",
        summary: "Add credits to a pool",
        access: "admin",
        body: credits.addCreditsBody,
        example: { pool: "live", amount: 5000 },
        answer: answers.usage,
        status: 200,
      },
      ({ ctx, params, body }) => credits.addCredits(ctx, p(params).project, body),
    ),
  ]),
  ...tagged("Failure queue", [
    route(
      "GET",
      `${base}/failures`,
      {
        operationId: "listFailures",
        summary: "Failed and partially failed requests, newest first",
        access: "editor",
        query: requests.listRequestsQuery,
        answer: answers.requestPage,
      },
      ({ ctx, params, query }) => failures.listFailures(ctx, p(params).project, query),
    ),
    route(
      "POST",
      `${base}/failures/replay`,
      {
        operationId: "replayFailures",
        summary: "Replay every failure that matches",
        access: "editor",
        body: failures.replayFailuresBody,
        example: { status: "failed", endpoint: "v1/orders" },
        answer: answers.replayed,
        status: 202,
      },
      ({ ctx, params, body }) => failures.replayFailures(ctx, p(params).project, body),
    ),
    route(
      "POST",
      `${base}/requests/:requestId/replay`,
      {
        operationId: "replayRequest",
        summary: "A new attempt series for the targets that failed",
        access: "editor",
        answer: answers.request,
        status: 202,
        errors: ["conflict"],
      },
      ({ ctx, params }) => failures.replayRequest(ctx, p(params).project, p(params).requestId),
    ),
  ]),
  ...tagged("Request log", [
    route(
      "GET",
      `${base}/requests`,
      {
        operationId: "listRequests",
        summary: "The request log, newest first",
        access: "editor",
        query: requests.listRequestsQuery,
        answer: answers.requestPage,
      },
      ({ ctx, params, query }) => requests.listRequests(ctx, p(params).project, query),
    ),
    route(
      "GET",
      `${base}/requests/:requestId`,
      {
        operationId: "getRequest",
        summary:
          "A request with its attempts; one the edge accepted and the worker has not logged yet reads as queued or scheduled (from Temporal: 503 when it cannot answer)",
        access: "editor",
        answer: answers.request,
        errors: ["unavailable"],
      },
      ({ ctx, params }) => requests.getRequest(ctx, p(params).project, p(params).requestId),
    ),
    route(
      "DELETE",
      `${base}/requests/:requestId`,
      {
        operationId: "cancelRequest",
        summary: "Cancel a request not yet delivered (scheduled, or between attempts)",
        access: "editor",
        answer: answers.request,
        errors: ["conflict", "request_already_delivered"],
      },
      ({ ctx, params }) => cancel.cancelRequest(ctx, p(params).project, p(params).requestId),
    ),
  ]),
  ...tagged("Dev clock", [
    route(
      "POST",
      "/admin/clock",
      {
        operationId: "advanceClock",
        summary: "Move the stack's time forward",
        description: `${DEV_CLOCK_ONLY} Answers once every edge runs on the new time.`,
        access: "admin",
        body: advanceClockBody,
        example: { advanceSeconds: 86400 },
        answer: answers.clock,
        status: 200,
        errors: ["not_found"],
      },
      async ({ app, ctx, body }) => {
        devOnly(app, ctx);
        const { advanceSeconds } = parseInput(advanceClockBody, body);
        const offsetMs = await app.clock.advance(advanceSeconds);
        return { now: app.clock.now(), offsetMs };
      },
    ),
    route(
      "POST",
      "/admin/rotation/run",
      {
        operationId: "runRotation",
        summary: "Run the daily key rotation now",
        description: DEV_CLOCK_ONLY,
        access: "admin",
        answer: answers.rotationRun,
        status: 200,
        errors: ["not_found"],
      },
      async ({ app, ctx }) => {
        devOnly(app, ctx);
        return { rotated: await app.runRotation() };
      },
    ),
  ]),
  ...tagged("Document", [
    route(
      "GET",
      "/openapi.json",
      {
        operationId: "getOpenApiDocument",
        summary: "This document",
        access: "public",
        answer: openApiAnswer,
      },
      async () => document(),
    ),
  ]),
];

/** Built on its first request: the routes are all there by then. */
let built: OpenApiDocument | undefined;
const document = () => {
  built ??= openApiDocument(routes);
  return built;
};

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
    // Reads, cancels and replays need Temporal as well as Postgres.
    checks: {
      postgres: () => postgresAnswers(deps.sql),
      temporal: async () => temporalAnswers(await deps.temporal()),
    },
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
      const caller: Caller =
        found.r.contract.access === "public"
          ? { kind: "anonymous" }
          : await authenticate(deps, credentials, req.headers.authorization);
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
        body: readsBody(req.method ?? "") ? await readJson(req, maxBodyBytes) : undefined,
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

/** The body as JSON, at most `maxBytes` of it (`readText`); an empty body is `{}`. */
export async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const text = await readText(req, maxBytes);
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new RelayError("bad_request", "body is not valid JSON");
  }
}

/**
 * The body as text, at most `maxBytes` of it. Bodies are never decompressed: a compressed one is
 * refused before it is read, as is one whose announced length is over the limit.
 */
export async function readText(req: Request, maxBytes: number): Promise<string> {
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding.toLowerCase() !== "identity") {
    throw new RelayError("unsupported_media_type", "send the body uncompressed");
  }
  const tooLarge = () => new RelayError("payload_too_large", `body over ${maxBytes} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) throw tooLarge();
  const read = await readCapped(Readable.toWeb(req) as ReadableStream<Uint8Array>, maxBytes);
  if (read === TOO_LARGE) throw tooLarge();
  return Buffer.from(read.buffer, read.byteOffset, read.byteLength).toString("utf8");
}
