/**
 * The document says what the server refuses, and the server refuses what the document forbids
 * (issue 29, found by Schemathesis; `npm run check:api` runs it whole): each rule here is checked
 * from outside, on the running control plane, beside the schema that states it.
 */
import { readFile } from "node:fs/promises";
import { request } from "undici";
import { beforeAll, expect, test } from "vitest";
import { api, newProject, stack } from "./helpers.ts";

interface Schema {
  [keyword: string]: unknown;
  properties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
}
let schemas: Record<string, Schema>;
let parameters: Record<string, { schema: Schema }>;
let project: Awaited<ReturnType<typeof newProject>>;
const base = () => `/projects/${project.slug}`;

beforeAll(async () => {
  const document = JSON.parse(await readFile("docs/openapi.json", "utf8"));
  ({ schemas, parameters } = document.components);
  project = await newProject();
  await api(project.ownerToken, "POST", `${base()}/lines`, { key: "v1" });
});

const owner = (method: string, path: string, body?: unknown) =>
  api(project.ownerToken, method, `${base()}${path}`, body);

test("a method a path does not take is 405 with Allow, on the routes and the ops paths", async () => {
  const routed = await api(project.ownerToken, "PATCH", `${base()}/keys`, {});
  expect([routed.status, routed.headers.allow]).toEqual([405, "GET, POST"]);
  for (const path of ["/healthz", "/readyz", "/metrics"]) {
    const ops = await request(`${stack().controlUrl}${path}`, { method: "POST" });
    await ops.body.dump();
    expect([path, ops.statusCode, ops.headers.allow]).toEqual([path, 405, "GET"]);
  }
  const worker = await request(`${stack().workerUrl}/healthz`, { method: "DELETE" });
  await worker.body.dump();
  expect([worker.statusCode, worker.headers.allow]).toEqual([405, "GET"]);
});

test("a path parameter with a control character is 400, and the document says so", async () => {
  expect(parameters.keyId?.schema.pattern).toBe("^[^\\x00-\\x1f\\x7f-\\x9f]+$");
  expect((await owner("DELETE", "/keys/key%01x")).status).toBe(400);
  expect((await owner("GET", "/lines/v%C2%851/endpoints")).status).toBe(400);
});

test("a name is at most 200 characters as sent, has more than spaces and no control character", async () => {
  const { name } = schemas.MintKeyBody?.properties ?? {};
  expect([name?.maxLength, typeof name?.pattern]).toEqual([200, "string"]);
  const refused = [` ${"k".repeat(200)}`, "   ", "nul\u0000here", "bell\u0007"];
  for (const bad of refused) {
    const minted = await owner("POST", "/keys", { name: bad, mode: "test" });
    expect([JSON.stringify(bad), minted.status]).toEqual([JSON.stringify(bad), 400]);
  }
  const trimmed = await owner("POST", "/keys", { name: "  spaced  ", mode: "test" });
  expect(trimmed.body.key).toMatchObject({ name: "spaced" });
});

test("a long name breaking the rule at its end is refused at once (the rule is linear)", async () => {
  // Quadratic under a backtracking pattern: 400,000 characters took minutes, past the timeout.
  const minted = await owner("POST", "/keys", {
    name: `${"k".repeat(400_000)}\u0000`,
    mode: "test",
  });
  expect(minted.status).toBe(400);
});

test("an empty or foreign cursor is refused, and the document states a cursor's characters", async () => {
  const cursor = (await api(project.ownerToken, "GET", "/openapi.json")).body as {
    paths: Record<string, { get: { parameters: { name: string; schema: Schema }[] } }>;
  };
  const listed = cursor.paths["/projects/{project}/requests"]?.get.parameters;
  expect(listed?.find((p) => p.name === "cursor")?.schema.pattern).toBe("^[A-Za-z0-9_-]+$");
  expect((await owner("GET", "/requests?cursor=")).status).toBe(400);
  expect((await owner("GET", "/requests?cursor=%00")).status).toBe(400);
});

test("an IP allowlist entry is an address or CIDR, and a notification URL is http(s)", async () => {
  const entry = schemas.CreateEndpointBody?.properties?.ipAllowlist?.items;
  // An address or a CIDR, v4 or v6, each a pattern (JSON Schema has no CIDR format).
  expect(entry?.anyOf?.map((s) => typeof s.pattern)).toEqual(Array(4).fill("string"));
  const target = [{ name: "t", targetUrl: "http://127.0.0.1:9/hook" }];
  for (const ipAllowlist of [[""], ["0"], ["10.0.0.0/33"]]) {
    const created = await owner("POST", "/lines/v1/endpoints", {
      path: "guarded",
      targets: target,
      ipAllowlist,
    });
    expect([ipAllowlist, created.status]).toEqual([ipAllowlist, 400]);
  }
  expect(schemas.SetNotificationsBody?.properties?.url?.format).toBe("uri");
  for (const url of ["ftp://example.com/hook", "example.com/hook", "https://\u0092"]) {
    expect([url, (await owner("PUT", "/notifications", { url })).status]).toEqual([url, 400]);
  }
});

test("null or blanks are no body for a signing-secret rotation; no body at all takes the defaults", async () => {
  const target = [{ name: "t", targetUrl: "http://127.0.0.1:9/hook" }];
  await owner("POST", "/lines/v1/endpoints", { path: "signed", targets: target });
  const path = "/lines/v1/endpoints/signed/signing-secret/rotate";
  for (const body of ["null", " ", "\n"]) {
    expect([body, (await owner("POST", path, body)).status]).toEqual([body, 400]);
  }
  expect((await owner("POST", path)).status).toBe(201);
});
