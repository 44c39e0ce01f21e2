/**
 * The OpenAPI document against the real stack: every operation it documents (read from the
 * document the control plane serves, so a new route cannot be skipped) is called with a request
 * built from it, and must answer its documented success with a body its schema accepts.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  api,
  finishedLog,
  newProject,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

interface MediaType {
  schema: object;
  example?: unknown;
}
interface Operation {
  operationId: string;
  security: Record<string, string[]>[];
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, { $ref?: string; content?: Record<string, MediaType> }>;
}
interface PathItem {
  servers?: unknown[];
  [method: string]: Operation | unknown[] | undefined;
}
interface Document {
  paths: Record<string, PathItem>;
  components: { responses: Record<string, { content?: Record<string, MediaType> }> };
}

let openapi: Document;
const ajv = new Ajv2020({ allErrors: true });
addFormats.default(ajv);
// The document is no JSON Schema, but its components hold the schemas the others refer to.
ajv.addKeyword("components");

/** Why `value` does not match `schema` (one of the document's), or null. */
function mismatch(schema: object, value: unknown): string | null {
  // Its `#/components/...` references point into the document, which ajv knows as "doc".
  const rooted = JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/');
  const validate = ajv.compile(JSON.parse(rooted));
  return validate(value) ? null : ajv.errorsText(validate.errors);
}

const target = await targetServer(() => ({ status: 400 })); // an answer that fails at once
afterAll(() => target.close());

/** The project, line, endpoint, target, keys, member and requests the calls are made on. */
let fixtures: Awaited<ReturnType<typeof setUp>>;

async function setUp() {
  const p = await projectWithEndpoint([{ name: "main", targetUrl: target.url }]);
  const call = (path: string, headers: Record<string, string> = {}) =>
    relay(p.slug, path, { key: p.key, body: "{}", headers });
  const failed = (await call("/v1/hook")).json().requestId as string;
  await finishedLog(p, failed);
  const scheduled = (await call("/v1/hook", { "relay-delay": "1h" })).json().requestId as string;
  const member = await api(p.ownerToken, "POST", `${p.base}/members`, {
    name: "m",
    role: "editor",
  });
  // A key a day from expiry gets an auto-rotated successor from the rotation run.
  const expiring = await api(p.ownerToken, "POST", `${p.base}/keys`, {
    name: "expiring",
    mode: "live",
    ttlDays: 1,
  });
  await api(stack().adminToken, "POST", "/admin/rotation/run");
  const spare = await api(p.ownerToken, "POST", `${p.base}/keys`, { name: "spare", mode: "test" });
  await api(p.ownerToken, "PUT", `${p.base}/notifications`, { url: "https://hooks.example.com/x" });
  // A recovery job that matches nothing: it ends at its first step.
  const recovery = await api(p.ownerToken, "POST", `${p.base}/recoveries`, { endpoint: "v1/none" });
  const schedule = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/hook/schedules`, {
    cron: "0 0 1 1 *",
  });
  // One to delete: the fixtures' own stays for the other operations.
  const doomed = await newProject();
  return {
    doomed: doomed.slug,
    recoveryId: recovery.body.recoveryId as string,
    scheduleId: schedule.body.scheduleId as string,
    ...p,
    failed,
    scheduled,
    memberId: (member.body.member as { id: string }).id,
    expiringKeyId: (expiring.body.key as { id: string }).id,
    keyId: (spare.body.key as { id: string }).id,
  };
}

beforeAll(async () => {
  openapi = (await api<Document>(null, "GET", "/openapi.json")).body;
  ajv.addSchema({ $id: "doc", components: openapi.components });
  fixtures = await setUp();
}, 120_000);

/** Each path parameter's value; some operations take one of their own. */
function parameters(operationId: string): Record<string, string> {
  const own: Record<string, Record<string, string>> = {
    // What the createLine and createEndpoint examples made, so the fixtures' own stay.
    deleteLine: { line: "v2" },
    updateEndpoint: { path: "orders" },
    deleteEndpoint: { path: "orders" },
    revealSuccessor: { keyId: fixtures.expiringKeyId },
    cancelRequest: { requestId: fixtures.scheduled },
    deleteProject: { project: fixtures.doomed },
  };
  return {
    project: fixtures.slug,
    line: "v1",
    path: "hook",
    endpoint: "hook",
    target: "main",
    memberId: fixtures.memberId,
    keyId: fixtures.keyId,
    requestId: fixtures.failed,
    recoveryId: fixtures.recoveryId,
    scheduleId: fixtures.scheduleId,
    ...own[operationId],
  };
}

/** Bodies other than the document's examples, where the example cannot be sent here as it is. */
const ownBodies: Record<string, unknown> = {
  // A fixed slug may be taken in a database that outlives one run.
  createProject: { slug: `openapi-${Date.now().toString(36)}`, name: "OpenAPI", plan: "paid" },
  // A day would move the shared stack's time under the test files that run after this one.
  advanceClock: { advanceSeconds: 0 },
};

/** Creates before changes before reads before deletes: each finds what an earlier one made. */
const ORDER = ["post", "put", "get", "delete"];

interface Call {
  path: string;
  method: string;
  operation: Operation;
  edge: boolean;
}

function calls(): Call[] {
  return Object.entries(openapi.paths)
    .flatMap(([path, item]) =>
      ORDER.flatMap((method) => {
        const operation = item[method] as Operation | undefined;
        return operation ? [{ path, method, operation, edge: item.servers !== undefined }] : [];
      }),
    )
    .sort((a, b) => ORDER.indexOf(a.method) - ORDER.indexOf(b.method));
}

/** The token an operation's security asks for. */
function tokenFor(operation: Operation): string | null {
  const schemes = operation.security.flatMap((s) => Object.keys(s));
  // The admin deletes a project of its own making (the fixtures' owner's stays).
  if (operation.operationId === "deleteProject") return stack().adminToken;
  if (schemes.includes("memberToken")) return fixtures.ownerToken;
  if (schemes.includes("adminToken")) return stack().adminToken;
  if (schemes.includes("apiKey")) return fixtures.key;
  return null;
}

async function send({ path, method, operation, edge }: Call, body: unknown) {
  const values = parameters(operation.operationId);
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) =>
    encodeURIComponent(values[name] ?? ""),
  );
  const token = tokenFor(operation);
  const text = body === undefined ? undefined : JSON.stringify(body);
  if (edge) {
    const answer = await relay(fixtures.slug, filled, { key: token, ...(text && { body: text }) });
    return {
      status: answer.status,
      type: String(answer.headers["content-type"]),
      text: answer.text,
    };
  }
  const answer = await request(`${stack().controlUrl}${filled}`, {
    method: method.toUpperCase() as "GET",
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(text && { "content-type": "application/json" }),
    },
    ...(text && { body: text }),
  });
  return {
    status: answer.statusCode,
    type: String(answer.headers["content-type"] ?? ""),
    text: await answer.body.text(),
  };
}

/** A documented response, its `$ref` followed. */
function response(operation: Operation, status: string) {
  const documented = operation.responses[status];
  const name = documented?.$ref?.replace("#/components/responses/", "");
  return name ? openapi.components.responses[name] : documented;
}

/** What is wrong with one answer to `call`, or null. */
function answerProblem(
  call: Call,
  answer: { status: number; type: string; text: string },
): string | null {
  const documented = response(call.operation, String(answer.status));
  if (!documented) return `answered ${answer.status}, which it does not document: ${answer.text}`;
  if (!documented.content)
    return answer.text === "" ? null : "answered a body it documents none of";
  const [mediaType, media] = Object.entries(documented.content)[0] ?? [];
  if (!mediaType || !media) return "documents no media type";
  if (!answer.type.startsWith(mediaType)) return `answered ${answer.type}, not ${mediaType}`;
  const value = mediaType === "application/json" ? JSON.parse(answer.text) : answer.text;
  const problem = mismatch(media.schema, value);
  return problem && `answered ${answer.status} ${answer.text.slice(0, 300)}: ${problem}`;
}

describe("every documented operation", () => {
  test("answers its documented success with a body its schema accepts", async () => {
    const problems: string[] = [];
    const all = calls();
    expect(all.length).toBeGreaterThan(40);
    for (const call of all) {
      const { operationId, requestBody, responses } = call.operation;
      const name = `${call.method.toUpperCase()} ${call.path} (${operationId})`;
      const media = requestBody?.content["application/json"];
      const body = ownBodies[operationId] ?? media?.example;
      if (media && body === undefined) problems.push(`${name}: its body has no example`);
      const bodyProblem = media && body !== undefined && mismatch(media.schema, body);
      if (bodyProblem) problems.push(`${name}: the body sent does not match: ${bodyProblem}`);
      const success = Object.keys(responses).find((status) => /^2\d\d$/.test(status));
      const answer = await send(call, body);
      const problem =
        String(answer.status) === success
          ? answerProblem(call, answer)
          : `answered ${answer.status}, not ${success}: ${answer.text.slice(0, 300)}`;
      if (problem) problems.push(`${name}: ${problem}`);
    }
    expect(problems).toEqual([]);
  }, 180_000);

  test("a refusal matches the Error schema of its documented status, code included", async () => {
    const byPath = (path: string, method: string) => ({
      path,
      method,
      operation: openapi.paths[path]?.[method] as Operation,
      edge: false,
    });
    const unknown = byPath("/projects/{project}/requests/{requestId}", "get");
    const missing = await api(fixtures.ownerToken, "GET", `${fixtures.base}/requests/req_none`);
    expect(missing.status).toBe(404);
    expect(
      answerProblem(unknown, { ...missing, type: String(missing.headers["content-type"]) }),
    ).toBeNull();
    const lines = byPath("/projects/{project}/lines", "post");
    const invalid = await api(fixtures.ownerToken, "POST", `${fixtures.base}/lines`, {
      key: "a b",
    });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ error: { details: [{ path: "key" }] } });
    expect(
      answerProblem(lines, { ...invalid, type: String(invalid.headers["content-type"]) }),
    ).toBeNull();
    // A code the status does not list for this operation is a mismatch.
    const recoded = {
      ...invalid.body,
      error: { ...(invalid.body.error as object), code: "conflict" },
    };
    expect(
      answerProblem(lines, { ...invalid, text: JSON.stringify(recoded), type: "application/json" }),
    ).toMatch(/must be equal to one of the allowed values/);
  });
});
