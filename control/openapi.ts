/**
 * The OpenAPI 3.1 document of the REST API, made from the route table's contracts
 * (control/rest/routes.ts): the zod schemas its operations parse with and answer by, as JSON
 * Schema draft 2020-12 (OpenAPI 3.1's dialect). The ops paths the control plane answers before its
 * routes, and the edge's inbound call, are described here beside them. Served at
 * `GET /openapi.json` and committed as docs/openapi.json (`npm run openapi`).
 */
import { STATUS_CODES } from "node:http";
import { z } from "zod";
import { type ErrorCode, errorStatus } from "../core/errors.ts";
import { components } from "./api/answers.ts";
import { type Access, type Route, tags } from "./rest/contract.ts";

/** Where the document is committed. */
export const OPENAPI_FILE = new URL("../docs/openapi.json", import.meta.url);

/** The answers of the paths no route of the table answers. */
const health = z.strictObject({ status: z.literal("ok") });

const readiness = z.strictObject({
  status: z.enum(["ready", "degraded", "unavailable"]),
  checks: z.record(z.string(), z.string()).describe('Each dependency\'s "ok", or why not'),
});

const accepted = z.strictObject({
  status: z.enum(["queued", "scheduled"]),
  requestId: z.string(),
});

/** What `GET /openapi.json` answers, as far as the document says of itself. */
export const openApiAnswer = z.looseObject({ openapi: z.literal("3.1.1") });

const SCHEMAS = "#/components/schemas/";
const ref = (id: string) => ({ $ref: `${SCHEMAS}${id}` });
const json = (schema: object) => ({ "application/json": { schema } });

const security: Record<Access, Record<string, string[]>[]> = {
  public: [],
  member: [{ memberToken: [] }, { adminToken: [] }],
  editor: [{ memberToken: [] }, { adminToken: [] }],
  owner: [{ memberToken: [] }, { adminToken: [] }],
  admin: [{ adminToken: [] }],
};

const accessNotes: Record<Access, string> = {
  public: "No token needed.",
  member: "Any member token; the admin token sees every project.",
  editor: "Owners and editors of the project, or the admin token.",
  owner: "Owners of the project, or the admin token.",
  admin: "The admin token only.",
};

const pathParameters = Object.fromEntries(
  Object.entries({
    project: "The project's slug",
    memberId: "The member's id",
    line: "The line's key",
    path: "The endpoint's path",
    target: "The target's name",
    keyId: "The key's id",
    requestId: "The request's id (`req_...`)",
  }).map(([name, description]) => [
    name,
    { name, in: "path", required: true, description, schema: { type: "string" } },
  ]),
);

/** Every error code, in core/errors.ts's order (which is by status). */
const errorOrder = Object.keys(errorStatus) as ErrorCode[];

/**
 * The document's refusals, each a response component: one per set of codes a status answers,
 * its body the Error schema with `code` narrowed to them.
 */
class Refusals {
  readonly components: Record<string, object> = {};

  /** A response per status for `codes`, by reference. */
  responses(codes: ErrorCode[]) {
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of errorOrder.filter((c) => codes.includes(c))) {
      byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code]);
    }
    return Object.fromEntries(
      [...byStatus].map(([status, refused]) => [String(status), this.named(status, refused)]),
    );
  }

  private named(status: number, codes: ErrorCode[]) {
    const name = codes
      .map((code) => code.replace(/(?:^|_)(.)/g, (_, c) => c.toUpperCase()))
      .join("Or");
    this.components[name] ??= {
      description: `${STATUS_CODES[status]}: ${codes.map((c) => `\`${c}\``).join(", ")}`,
      content: json({
        allOf: [ref("Error")],
        type: "object",
        properties: { error: { type: "object", properties: { code: { enum: codes } } } },
      }),
    };
    return { $ref: `#/components/responses/${name}` };
  }
}

function queryParameters(query: z.ZodObject) {
  const schema = z.toJSONSchema(query, { target: "draft-2020-12", io: "input" });
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: "query",
    required: schema.required?.includes(name) ?? false,
    schema: property,
  }));
}

/** A route as an OpenAPI operation; `body` and `answer` name its schemas' components. */
function operation(
  route: Route,
  body: string | undefined,
  answer: string | undefined,
  refusals: Refusals,
) {
  const { contract } = route;
  const parameters = [
    ...[...route.path.matchAll(/:(\w+)/g)].map(([, name]) => ({
      $ref: `#/components/parameters/${name}`,
    })),
    ...(contract.query ? queryParameters(contract.query) : []),
  ];
  return {
    operationId: contract.operationId,
    summary: contract.summary,
    description: [contract.description, accessNotes[contract.access]].filter(Boolean).join(" "),
    tags: [route.tag],
    security: security[contract.access],
    ...(parameters.length > 0 && { parameters }),
    ...(contract.body &&
      body && {
        requestBody: {
          // An empty body reads as {}: a body whose every field may be left out may be left out.
          required: !contract.body.safeParse({}).success,
          content: {
            "application/json": {
              schema: ref(body),
              ...(contract.example !== undefined && { example: contract.example }),
            },
          },
        },
      }),
    responses: {
      [String(route.status)]: {
        description: STATUS_CODES[route.status],
        ...(answer && { content: json(ref(answer)) }),
      },
      ...refusals.responses(route.errors),
    },
  };
}

/** The ops paths (core/ops.ts), which the control plane answers before any route. */
const opsPaths = (refusals: Refusals) => ({
  "/healthz": {
    get: {
      operationId: "healthz",
      summary: "The process is alive",
      tags: ["Operations"],
      security: [],
      responses: { "200": { description: "Alive", content: json(ref("Health")) } },
    },
  },
  "/readyz": {
    get: {
      operationId: "readyz",
      summary: "The process's dependencies answer (the control plane's: Postgres)",
      tags: ["Operations"],
      security: [],
      responses: {
        "200": { description: "Ready, or degraded", content: json(ref("Readiness")) },
        "503": { description: "A dependency does not answer", content: json(ref("Readiness")) },
      },
    },
  },
  "/metrics": {
    get: {
      operationId: "metrics",
      summary: "Prometheus text metrics",
      description:
        "With RELAY_METRICS_TOKEN set, it needs that token; unset, only loopback peers that are not a proxy passing a request on may scrape.",
      tags: ["Operations"],
      security: [{}, { metricsToken: [] }],
      responses: {
        "200": {
          description: "The metrics",
          content: { "text/plain": { schema: { type: "string" } } },
        },
        ...refusals.responses(["forbidden"]),
      },
    },
  },
});

/** The edge's inbound call, on the project's own host (docs/api.md, "The inbound pipeline"). */
const edgePath = (refusals: Refusals) => ({
  "/{line}/{endpoint}": {
    servers: [
      {
        url: "{scheme}://{project}.{domain}",
        description: "The edge: each project is reached on a host of its own",
        variables: {
          scheme: { default: "http", enum: ["http", "https"] },
          project: { default: "demo", description: "The project's slug" },
          domain: { default: "localhost:8787", description: "RELAY_EDGE_DOMAIN" },
        },
      },
    ],
    post: {
      operationId: "relayRequest",
      summary: "Relay a request to an endpoint's targets (the edge's inbound call)",
      description:
        "An async endpoint answers 202 at once and delivers to each of its targets, retried; a sync or stream endpoint answers with its target's own answer. Every answer from the delivery step on carries `X-Relay-Request-Id`, and every answer past the endpoint lookup the `RateLimit-*` headers. Any method but POST is 405 `method_not_allowed` with `Allow: POST`. The checks run in the order of docs/api.md's inbound pipeline.",
      tags: ["Edge (inbound)"],
      security: [{ apiKey: [] }],
      parameters: [
        { name: "line", in: "path", required: true, schema: { type: "string" } },
        { name: "endpoint", in: "path", required: true, schema: { type: "string" } },
        {
          name: "Idempotency-Key",
          in: "header",
          description:
            "A repeat with the same key answers what the first call answered and queues nothing; not on a stream endpoint",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
        {
          name: "Relay-Delay",
          in: "header",
          description: "Deliver this long from now (at most 7 days; async endpoints only)",
          schema: { type: "string", pattern: "^[0-9]+[smhd]$" },
        },
        {
          name: "Relay-Not-Before",
          in: "header",
          description: "Deliver at this time (at most 7 days ahead; async endpoints only)",
          schema: { type: "string", format: "date-time" },
        },
        {
          name: "traceparent",
          in: "header",
          description:
            "W3C trace context: when Relay exports traces, its spans continue this trace (a new one without it) and each target gets the traceparent of its attempt's span; otherwise it is passed on as it came",
          schema: {
            type: "string",
            pattern: "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
          },
        },
      ],
      requestBody: {
        description:
          "The payload, delivered as sent; with the endpoint's schema, JSON that satisfies it",
        content: {
          "application/json": { schema: ref("JsonValue"), example: { hello: "relay" } },
          "*/*": { schema: {} },
        },
      },
      responses: {
        "202": {
          description:
            "An async endpoint: queued, or scheduled by `Relay-Delay` or `Relay-Not-Before`",
          headers: {
            "X-Relay-Request-Id": { schema: { type: "string" } },
            "RateLimit-Limit": { schema: { type: "integer" } },
            "RateLimit-Remaining": { schema: { type: "integer" } },
            "RateLimit-Reset": { schema: { type: "integer" } },
          },
          content: json(ref("Accepted")),
        },
        ...refusals.responses([
          "bad_request",
          "invalid_or_missing_key",
          "key_revoked",
          "key_expired",
          "insufficient_credits",
          "ip_not_allowed",
          "not_found",
          "request_timeout",
          "payload_too_large",
          "unsupported_media_type",
          "validation_failed",
          "idempotency_key_reused",
          "rate_limited",
          "internal",
          "target_unreachable",
          "unavailable",
          "target_timeout",
        ]),
        default: {
          description:
            "A sync or stream endpoint: the target's own status, headers and body, as it answered",
          content: { "*/*": { schema: {} } },
        },
      },
    },
  },
});

const securitySchemes = {
  memberToken: {
    type: "http",
    scheme: "bearer",
    description:
      "A member token (`rmt_...`): the owner's from the project's creation, or one an owner added",
  },
  adminToken: {
    type: "http",
    scheme: "bearer",
    description: "The deployment's admin token (RELAY_ADMIN_TOKEN): an owner of every project",
  },
  apiKey: {
    type: "http",
    scheme: "bearer",
    description: "A project API key (`rk_live_...` or `rk_test_...`)",
  },
  metricsToken: {
    type: "http",
    scheme: "bearer",
    description: "RELAY_METRICS_TOKEN",
  },
};

/** The document, in the route table's order: the same routes make the same bytes. */
export function openApiDocument(routes: readonly Route[]) {
  const registry = z.registry<{ id: string }>();
  /** The component `schema` is, named `id` unless it already has a name. */
  const named = (schema: z.ZodType, id: string): string => {
    if (!registry.has(schema)) registry.add(schema, { id });
    return registry.get(schema)?.id ?? id;
  };
  const all = { ...components, Health: health, Readiness: readiness, Accepted: accepted };
  for (const [id, schema] of Object.entries(all)) named(schema, id);
  const operations = routes.map((route) => {
    const { operationId, body, answer } = route.contract;
    const name = operationId.replace(/^./, (first) => first.toUpperCase());
    return {
      route,
      body: body && named(body, `${name}Body`),
      answer: answer && named(answer, `${name}Answer`),
    };
  });
  // Every schema on its input side: a body's as a caller sends it, an answer's as JSON carries it.
  const converted = z.toJSONSchema(registry, {
    target: "draft-2020-12",
    io: "input",
    uri: (id) => `${SCHEMAS}${id}`,
  }).schemas;
  const schemas = Object.fromEntries(
    Object.keys(converted)
      .sort()
      .map((id) => {
        const { $schema: _, $id: __, ...schema } = converted[id] ?? {};
        return [id, schema];
      }),
  );
  const refusals = new Refusals();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { route, body, answer } of operations) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const described = operation(route, body, answer, refusals);
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: described };
  }
  return {
    openapi: "3.1.1" as const,
    info: {
      title: "Relay",
      version: "v1",
      description:
        'The management API as REST JSON on the control plane (its Connect and gRPC twins are in proto/relay/v1/), the ops paths, and the edge\'s inbound call. Every refusal is `{"error": {"code", "message", "details"?}}`; an unknown path is 404 `not_found`, a method a path does not take 405 `method_not_allowed`. Generated from the schemas that validate each call (control/openapi.ts).',
    },
    servers: [
      {
        url: "http://127.0.0.1:8788",
        description:
          "The control plane of `npm start`; RELAY_CONTROL_HOST and RELAY_CONTROL_PORT move it",
      },
    ],
    tags: Object.entries(tags).map(([name, description]) => ({ name, description })),
    paths: { ...paths, ...opsPaths(refusals), ...edgePath(refusals) },
    components: {
      schemas,
      parameters: pathParameters,
      responses: refusals.components,
      securitySchemes,
    },
  };
}

export type OpenApiDocument = ReturnType<typeof openApiDocument>;
