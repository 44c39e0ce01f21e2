/**
 * Per-project caps (issue 24, item 4): a project cannot grow without bound. Past each cap a
 * create is 409 `limit_exceeded` naming the cap and its value, on REST and Connect alike, and
 * creates racing at the cap leave exactly the cap. Each test lowers its project's caps through
 * the admin's per-project override, but the first, which fills the default by one SQL insert.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, expect, test } from "vitest";
import { KeyService } from "../gen/relay/v1/keys_pb.ts";
import { MemberService, ProjectService, Role } from "../gen/relay/v1/projects_pb.ts";
import { DeliveryMode, EndpointService } from "../gen/relay/v1/routing_pb.ts";
import { connect } from "../store/db.ts";
import { api, memberClient, newProject, stack } from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
afterAll(() => sql.end());

const target = { name: "sink", targetUrl: "http://127.0.0.1:9/in" };

/** A project with line `v1` whose caps the admin set to `limits`. */
async function cappedProject(limits: Record<string, number>) {
  const p = await newProject();
  const base = `/projects/${p.slug}`;
  expect((await api(p.ownerToken, "POST", `${base}/lines`, { key: "v1" })).status).toBe(201);
  const set = await api(stack().adminToken, "PUT", `${base}/limits`, limits);
  expect(set.status, set.text).toBe(200);
  return { ...p, base };
}

const createEndpoint = (p: { ownerToken: string; base: string }, path: string, extra = {}) =>
  api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints`, {
    path,
    targets: [target],
    ...extra,
  });

/** A JSON Schema of about `bytes` bytes. */
function schemaOf(bytes: number) {
  return { type: "object", description: "x".repeat(bytes - 40) };
}

function expectRefusal(answer: { status: number; body: unknown }, named: RegExp) {
  expect(answer.status).toBe(409);
  expect(answer.body).toMatchObject({
    error: { code: "limit_exceeded", message: expect.any(String) },
  });
  expect((answer.body as { error: { message: string } }).error.message).toMatch(named);
}

async function connectRefusal(call: Promise<unknown>): Promise<ConnectError> {
  const error = ConnectError.from(
    await call.then(
      () => null,
      (cause: unknown) => cause,
    ),
  );
  expect(error.code).toBe(Code.ResourceExhausted);
  expect(error.metadata.get("relay-error-code")).toBe("limit_exceeded");
  return error;
}

test("the 1,001st endpoint of a project is 409 limit_exceeded, by default", async () => {
  const p = await newProject();
  const base = `/projects/${p.slug}`;
  await api(p.ownerToken, "POST", `${base}/lines`, { key: "v1" });
  // 999 endpoints in one insert: 999 API calls would take the test minutes.
  await sql`
    insert into endpoints (id, project_id, line_key, path)
    select 'ep_fill_' || ${p.slug} || '_' || n, id, 'v1', 'fill' || n
    from projects, generate_series(1, 999) n where slug = ${p.slug}`;
  expect((await createEndpoint({ ...p, base }, "last")).status).toBe(201);
  expectRefusal(
    await createEndpoint({ ...p, base }, "one-more"),
    /cap of 1000 endpoints per project/,
  );
  const limits = await api(p.ownerToken, "GET", `${base}/limits`);
  expect(limits.body).toMatchObject({ endpoints: { limit: 1000, used: 1000 } });
});

test("endpoints past a lowered cap are refused on REST and Connect; a delete makes room", async () => {
  const p = await cappedProject({ endpoints: 2 });
  expect((await createEndpoint(p, "a")).status).toBe(201);
  expect((await createEndpoint(p, "b")).status).toBe(201);
  expectRefusal(await createEndpoint(p, "c"), /cap of 2 endpoints per project/);
  const client = memberClient(EndpointService, p.ownerToken);
  const refused = await connectRefusal(
    client.createEndpoint({
      project: p.slug,
      line: "v1",
      endpoint: {
        path: "c",
        targets: [{ ...target, deliveryMode: DeliveryMode.ASYNC }],
      },
    }),
  );
  expect(refused.rawMessage).toMatch(/cap of 2 endpoints per project/);
  expect((await api(p.ownerToken, "DELETE", `${p.base}/lines/v1/endpoints/a`)).status).toBe(204);
  expect((await createEndpoint(p, "c")).status).toBe(201);
});

test("schema bytes past the project's cap are refused on create and on an update that grows them", async () => {
  const p = await cappedProject({ schemaBytes: 5000 });
  expect((await createEndpoint(p, "a", { schema: schemaOf(3000) })).status).toBe(201);
  expectRefusal(
    await createEndpoint(p, "b", { schema: schemaOf(3000) }),
    /cap of 5000 schema bytes per project/,
  );
  expect((await createEndpoint(p, "b", { schema: schemaOf(1500) })).status).toBe(201);
  const update = (bytes: number) =>
    api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/a`, {
      targets: [target],
      schema: schemaOf(bytes),
    });
  expectRefusal(await update(4000), /cap of 5000 schema bytes per project/);
  expect((await update(3400)).status).toBe(200); // the same endpoint's old schema is not counted twice
  const limits = await api(p.ownerToken, "GET", `${p.base}/limits`);
  expect(limits.body).toMatchObject({ schemaBytes: { limit: 5000 } });
});

test("lines, members and live keys past their caps are refused", async () => {
  const p = await cappedProject({ lines: 1, members: 2, keys: 2 });
  expectRefusal(
    await api(p.ownerToken, "POST", `${p.base}/lines`, { key: "v2" }),
    /cap of 1 lines per project/,
  );

  // The owner is the first member.
  const add = () => api(p.ownerToken, "POST", `${p.base}/members`, { name: "ed", role: "editor" });
  expect((await add()).status).toBe(201);
  expectRefusal(await add(), /cap of 2 members per project/);
  await connectRefusal(
    memberClient(MemberService, p.ownerToken).addMember({
      project: p.slug,
      name: "ed",
      role: Role.EDITOR,
    }),
  );

  const mint = () => api(p.ownerToken, "POST", `${p.base}/keys`, { name: "k", mode: "live" });
  const first = await mint();
  expect(first.status).toBe(201);
  expect((await mint()).status).toBe(201);
  expectRefusal(await mint(), /cap of 2 live API keys per project/);
  await connectRefusal(
    memberClient(KeyService, p.ownerToken).mintKey({ project: p.slug, name: "k", mode: 1 }),
  );
  const firstId = (first.body as { key: { id: string } }).key.id;
  // A rotation adds a live key too (its predecessor stays valid until it expires).
  expectRefusal(
    await api(p.ownerToken, "POST", `${p.base}/keys/${firstId}/rotate`),
    /cap of 2 live API keys/,
  );
  // A revoked key no longer counts.
  expect((await api(p.ownerToken, "DELETE", `${p.base}/keys/${firstId}`)).status).toBe(200);
  expect((await mint()).status).toBe(201);
});

test("creates racing at the cap leave exactly the cap", async () => {
  const p = await cappedProject({ endpoints: 3, keys: 3 });
  const endpoints = await Promise.all(
    Array.from({ length: 8 }, (_, i) => createEndpoint(p, `race${i}`)),
  );
  expect(endpoints.map((a) => a.status).sort()).toEqual([201, 201, 201, 409, 409, 409, 409, 409]);
  const listed = await api<{ endpoints: unknown[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/lines/v1/endpoints`,
  );
  expect(listed.body.endpoints).toHaveLength(3);

  const keys = await Promise.all(
    Array.from({ length: 8 }, () =>
      api(p.ownerToken, "POST", `${p.base}/keys`, { name: "k", mode: "test" }),
    ),
  );
  expect(keys.filter((a) => a.status === 201)).toHaveLength(3);
  const limits = await api(p.ownerToken, "GET", `${p.base}/limits`);
  expect(limits.body).toMatchObject({ endpoints: { used: 3 }, keys: { used: 3 } });
});

test("only the admin sets a project's caps; null restores the default; Connect reads them too", async () => {
  const p = await cappedProject({ endpoints: 5 });
  const byOwner = await api(p.ownerToken, "PUT", `${p.base}/limits`, { endpoints: 5000 });
  expect(byOwner.status).toBe(403);
  const restored = await api(stack().adminToken, "PUT", `${p.base}/limits`, { endpoints: null });
  expect(restored.body).toMatchObject({ endpoints: { limit: 1000, used: 0 } });
  const read = await memberClient(ProjectService, p.ownerToken).getProjectLimits({
    project: p.slug,
  });
  expect(read.limits?.endpoints?.limit).toBe(1000);
});
