/**
 * The OpenAPI 3.1 document of the REST API, made from the route table's contracts
 * (control/rest/routes.ts): the zod schemas its operations parse with and answer by, as JSON
 * Schema draft 2020-12 (OpenAPI 3.1's dialect). The ops paths the control plane answers before its
 * routes, and the edge's inbound call, are described beside them (control/openapi/ops-and-edge.ts).
 * Served at `GET /openapi.json` and committed as docs/openapi.json (`npm run openapi`).
 */
import { STATUS_CODES } from "node:http";
import { z } from "zod";
import { components } from "./api/answers.ts";
import { accepted, edgePath, health, opsPaths, readiness } from "./openapi/ops-and-edge.ts";
import { json, Refusals, ref, SCHEMAS, segment } from "./openapi/refusals.ts";
import { type Access, type Route, tags } from "./rest/contract.ts";

/** Where the document is committed. */
export const OPENAPI_FILE = new URL("../docs/openapi.json", import.meta.url);

/** What `GET /openapi.json` answers, as far as the document says of itself. */
export const openApiAnswer = z.looseObject({ openapi: z.literal("3.1.1") });

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
    recoveryId: "The recovery job's id (`rec_...`)",
    scheduleId: "The schedule's id (`sch_...`)",
  }).map(([name, description]) => [
    name,
    { name, in: "path", required: true, description, schema: segment },
  ]),
);

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
  otherAnswer?: string,
) {
  const { contract } = route;
  const { other } = contract;
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
      ...(other &&
        otherAnswer && {
          [String(other.status)]: {
            description: `${STATUS_CODES[other.status]}: ${other.when}`,
            content: json(ref(otherAnswer)),
          },
        }),
      ...refusals.responses(route.errors),
    },
  };
}

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

/** The keywords whose value is a schema, a list of schemas, or a map of names to schemas. */
const SUBSCHEMAS = new Set(["items", "prefixItems", "additionalProperties", "propertyNames"]);
const SCHEMA_LISTS = new Set(["anyOf", "oneOf", "allOf"]);
const SCHEMA_MAPS = new Set(["properties", "patternProperties"]);

/**
 * A body's schema with each `default` said in its description instead: a field with a default may
 * be left out, but openapi-typescript, at its default settings, makes such a field required.
 */
function defaultsSaid(schema: object): object {
  const { default: value, ...rest } = schema as Record<string, unknown>;
  const walked = Object.fromEntries(
    Object.entries(rest).map(([keyword, inner]) => {
      if (typeof inner !== "object" || inner === null) return [keyword, inner];
      if (SUBSCHEMAS.has(keyword)) return [keyword, defaultsSaid(inner)];
      if (SCHEMA_LISTS.has(keyword)) return [keyword, (inner as object[]).map(defaultsSaid)];
      if (!SCHEMA_MAPS.has(keyword)) return [keyword, inner];
      const named = Object.entries(inner as Record<string, object>);
      return [keyword, Object.fromEntries(named.map(([name, s]) => [name, defaultsSaid(s)]))];
    }),
  );
  if (value === undefined) return walked;
  const said = `Default: \`${JSON.stringify(value)}\`.`;
  const { description } = walked;
  return { ...walked, description: description ? `${description}. ${said}` : said };
}

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
    const { operationId, body, answer, other } = route.contract;
    const name = operationId.replace(/^./, (first) => first.toUpperCase());
    return {
      route,
      body: body && named(body, `${name}Body`),
      answer: answer && named(answer, `${name}Answer`),
      other: other && named(other.answer, `${name}OtherAnswer`),
    };
  });
  // Every schema on its input side: a body's as a caller sends it, an answer's as JSON carries it.
  const converted = z.toJSONSchema(registry, {
    target: "draft-2020-12",
    io: "input",
    uri: (id) => `${SCHEMAS}${id}`,
  }).schemas;
  const bodies = new Set(operations.map((o) => o.body));
  const schemas = Object.fromEntries(
    Object.keys(converted)
      .sort()
      .map((id) => {
        const { $schema: _, $id: __, ...schema } = converted[id] ?? {};
        return [id, bodies.has(id) ? defaultsSaid(schema) : schema];
      }),
  );
  const refusals = new Refusals();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { route, body, answer, other } of operations) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const described = operation(route, body, answer, refusals, other);
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
