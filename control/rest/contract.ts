/**
 * What a REST route is: its contract (what it takes, answers and refuses, and who may call it),
 * its path and its handler. The resources' files declare their routes with `route`, the router
 * runs them and the OpenAPI document (control/openapi.ts) is made of them, so this file sits below
 * all three.
 */
import type { z } from "zod";
import type { ErrorCode } from "../../core/errors.ts";
import type { Ctx } from "../api/context.ts";
import type { ControlApp } from "../app.ts";

/** What a route's handler is given: the path's parameters decoded, the body parsed as JSON. */
export interface Call {
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
  /** An answer of another shape at a status of its own, given as an `OtherAnswer` (a dry run's). */
  other?: { status: number; answer: z.ZodType; when: string };
  /** What it may refuse beyond what every route like it may (`refusalsOf`). */
  errors?: ErrorCode[];
}

/** The document's tags, in its order: each route is under one, each resource's file under one. */
export const tags = {
  Projects: "Projects and where they are reached",
  Members: "Who manages a project, and as what",
  Policy: "The project's rules for API key lifetimes",
  Notifications: "The URL Relay posts its operational events to (docs/notifications.md)",
  Lines: "The first segment of an inbound URL, grouping endpoints",
  Endpoints: "Where a line's requests are delivered, and how",
  Transformations: "Trying a target's transformation before it is saved",
  "Delivery control": "Circuit breakers and pauses, per target",
  Keys: "Project API keys, which callers of the edge present",
  Usage: "Credits and deliveries",
  "Failure queue": "Requests whose delivery failed for good, and their replay",
  "Recovery jobs": "A replay of many requests by filter, in the background, with its progress",
  Schedules: "Endpoints' crons, each fire a call through the edge",
  "Request log": "Every request with its attempts",
  "Dev clock": "Moving time in a development stack (RELAY_DEV_CLOCK=1)",
  Document: "This document",
  Operations: "What every process answers its operators",
  "Edge (inbound)": "The call a caller makes to the edge, on its project's own host",
} as const;

export type Tag = keyof typeof tags;

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
export function route<
  Body extends z.ZodType | undefined,
  Answer extends z.ZodType | undefined = undefined,
>(
  method: string,
  path: string,
  contract: Contract<Body, Answer>,
  handle: (call: Call) => Promise<Answer extends z.ZodType ? z.output<Answer> | OtherAnswer : void>,
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

/** A route's answer of its contract's `other` shape and status. */
export class OtherAnswer {
  constructor(readonly value: unknown) {}
}

/**
 * What a route may refuse by how the router (`handleRest`) treats it, and its contract's own: any
 * request target or query value may be malformed (400) and anything may fail unexpectedly (500);
 * a token may be wrong or of the wrong kind (401, 403); a project may not be the caller's (404); a
 * body may be compressed or too large (415, 413).
 */
function refusalsOf(method: string, path: string, contract: Contract): ErrorCode[] {
  const codes: ErrorCode[] = ["bad_request", "internal"];
  if (contract.access !== "public") codes.push("unauthenticated", "forbidden");
  if (path.startsWith(base)) codes.push("not_found");
  if (readsBody(method)) codes.push("payload_too_large", "unsupported_media_type");
  return [...new Set([...codes, ...(contract.errors ?? [])])];
}

/** Whether the router reads a body for `method`. */
export const readsBody = (method: string) => method !== "GET" && method !== "DELETE";

/** Routes under one tag of the document. */
export const tagged = (tag: Tag, list: Omit<Route, "tag">[]): Route[] =>
  list.map((r) => ({ ...r, tag }));

/** The paths several resources' routes hang from. */
export const base = "/projects/:project";
export const endpointPath = `${base}/lines/:line/endpoints/:path`;

/** Route parameters (decoded by the router); a route only runs when its groups matched. */
export function p(params: Record<string, string>) {
  return params as Record<
    | "project"
    | "line"
    | "path"
    | "target"
    | "requestId"
    | "keyId"
    | "memberId"
    | "recoveryId"
    | "scheduleId",
    string
  >;
}

/** The endpoint a route's path names. */
export const endpointRef = (params: Record<string, string>) => ({
  line: p(params).line,
  path: p(params).path,
});
