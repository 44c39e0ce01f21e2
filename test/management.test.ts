import { describe, expect, test } from "vitest";
import { ProjectService } from "../gen/relay/v1/projects_pb.ts";
import { api, memberClient, newProject, stack } from "./helpers.ts";

const target = { name: "t", targetUrl: "http://127.0.0.1:9/in" };

async function projectWithLine() {
  const project = await newProject();
  await api(project.ownerToken, "POST", `/projects/${project.slug}/lines`, { key: "v1" });
  return { ...project, endpoints: `/projects/${project.slug}/lines/v1/endpoints` };
}

describe("projects", () => {
  test("only the admin creates projects; the owner token is shown once and works", async () => {
    const { slug, ownerToken } = await newProject();
    expect(ownerToken).toMatch(/^rmt_/);
    const refused = await api(ownerToken, "POST", "/projects", { slug: `${slug}x`, name: "x" });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: { code: "forbidden", message: expect.any(String) } });
    expect((await api(ownerToken, "GET", `/projects/${slug}`)).body).toMatchObject({
      slug,
      plan: "paid",
    });
  });

  test("the project list says whether the caller is the admin token, over REST and Connect", async () => {
    const { slug, ownerToken } = await newProject();
    const mine = await api(ownerToken, "GET", "/projects");
    expect(mine.body).toEqual({
      projects: [expect.objectContaining({ project: expect.objectContaining({ slug }) })],
      callerIsAdmin: false,
    });
    const all = await api<{ projects: unknown[]; callerIsAdmin: boolean }>(
      stack().adminToken,
      "GET",
      "/projects",
    );
    expect(all.body.callerIsAdmin).toBe(true);
    expect(all.body.projects).toContainEqual(expect.objectContaining({ memberName: "" }));
    const admin = memberClient(ProjectService, stack().adminToken);
    expect((await admin.listProjects({})).callerIsAdmin).toBe(true);
    const member = memberClient(ProjectService, ownerToken);
    expect((await member.listProjects({})).callerIsAdmin).toBe(false);
  });

  test("a duplicate slug is 409; a slug that is no DNS label is 400 naming the field", async () => {
    const { slug } = await newProject();
    const duplicate = await api(stack().adminToken, "POST", "/projects", { slug, name: "again" });
    expect(duplicate.status).toBe(409);
    const bad = await api(stack().adminToken, "POST", "/projects", {
      slug: "Not_A_Label",
      name: "x",
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: "bad_request", details: [{ path: "slug" }] } });
  });

  test("no token is 401; another project's member sees 404, as for a project that does not exist", async () => {
    const [mine, theirs] = [await newProject(), await newProject()];
    expect((await api(null, "GET", `/projects/${mine.slug}`)).status).toBe(401);
    expect((await api("rmt_wrong", "GET", `/projects/${mine.slug}`)).status).toBe(401);
    const foreign = await api(theirs.ownerToken, "GET", `/projects/${mine.slug}`);
    const missing = await api(theirs.ownerToken, "GET", "/projects/does-not-exist");
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toMatchObject({ code: "not_found" });
    expect(missing.status).toBe(404);
  });

  test("a body that is not JSON is 400, an unknown route 404, a wrong method 405", async () => {
    const { slug, ownerToken } = await newProject();
    const notJson = await api(ownerToken, "POST", `/projects/${slug}/lines`, "{not json");
    expect(notJson.status).toBe(400);
    expect((await api(ownerToken, "GET", "/nothing/here")).status).toBe(404);
    expect((await api(ownerToken, "PATCH", `/projects/${slug}/lines`)).status).toBe(405);
  });
});

describe("endpoints", () => {
  test("an endpoint round-trips with its targets, defaults filled in", async () => {
    const { ownerToken, endpoints } = await projectWithLine();
    const created = await api(ownerToken, "POST", endpoints, {
      path: "orders",
      targets: [
        target,
        {
          name: "live",
          targetUrl: "https://example.test/x",
          deliveryMode: "sync",
          timeoutSeconds: 5,
        },
      ],
      ipAllowlist: ["10.0.0.0/8", "2001:db8::/32"],
      schema: { type: "object", properties: { user_id: { type: "string" } } },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      line: "v1",
      path: "orders",
      version: 1,
      ipAllowlist: ["10.0.0.0/8", "2001:db8::/32"],
      // Schema keys are the customer's, kept exactly.
      schema: { type: "object", properties: { user_id: { type: "string" } } },
      rateLimit: null,
      targets: [
        { name: "t", deliveryMode: "async", timeoutSeconds: 30, headers: {} },
        { name: "live", deliveryMode: "sync", timeoutSeconds: 5 },
      ],
    });
    const updated = await api(ownerToken, "PUT", `${endpoints}/orders`, { targets: [target] });
    expect(updated.body).toMatchObject({ version: 2, targets: [{ name: "t" }] });
    expect((created.body.targets as { id: string }[])[0]?.id).toBe(
      (updated.body.targets as { id: string }[])[0]?.id,
    );
    expect((await api(ownerToken, "DELETE", `${endpoints}/orders`)).status).toBe(204);
    expect((await api(ownerToken, "GET", `${endpoints}/orders`)).status).toBe(404);
  });

  test.each([
    [
      "a sync timeout of 91 s",
      { targets: [{ ...target, deliveryMode: "sync", timeoutSeconds: 91 }] },
      "targets.0.timeoutSeconds",
    ],
    [
      "a sync timeout of 0 s",
      { targets: [{ ...target, deliveryMode: "sync", timeoutSeconds: 0 }] },
      "targets.0.timeoutSeconds",
    ],
    [
      "two answering targets",
      {
        targets: [
          { ...target, deliveryMode: "stream" },
          { name: "u", targetUrl: target.targetUrl, deliveryMode: "sync" },
        ],
      },
      "targets",
    ],
    ["no targets", { targets: [] }, "targets"],
    [
      "a non-http target URL",
      { targets: [{ name: "t", targetUrl: "ftp://x/y" }] },
      "targets.0.targetUrl",
    ],
    [
      "an unknown delivery mode",
      { targets: [{ ...target, deliveryMode: "later" }] },
      "targets.0.deliveryMode",
    ],
    ["a bad CIDR", { targets: [target], ipAllowlist: ["10.0.0.0/33"] }, "ipAllowlist.0"],
    [
      "a schema that does not compile",
      { targets: [target], schema: { type: "no-such-type" } },
      "schema",
    ],
    [
      "a reserved target header",
      { targets: [{ ...target, headers: { "X-Relay-Attempt": "1" } }] },
      "targets.0.headers",
    ],
    // fetch cannot send either: each of the target's deliveries would fail.
    [
      "a target header value with a line break",
      { targets: [{ ...target, headers: { "x-a": "a\nb" } }] },
      "targets.0.headers.x-a",
    ],
    [
      "a target header value beyond Latin-1",
      { targets: [{ ...target, headers: { "x-a": "\u{1F600}" } }] },
      "targets.0.headers.x-a",
    ],
  ])("%s is refused with 400 naming the field", async (_, spec, path) => {
    const { ownerToken, endpoints } = await projectWithLine();
    const answer = await api(ownerToken, "POST", endpoints, { path: "e", ...spec });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({
      error: {
        code: "bad_request",
        details: expect.arrayContaining([expect.objectContaining({ path })]),
      },
    });
    expect((await api(ownerToken, "GET", `${endpoints}/e`)).status).toBe(404);
  });

  test("an endpoint on a missing line is 404; a duplicate path is 409", async () => {
    const { slug, ownerToken, endpoints } = await projectWithLine();
    const missing = await api(ownerToken, "POST", `/projects/${slug}/lines/v9/endpoints`, {
      path: "e",
      targets: [target],
    });
    expect(missing.status).toBe(404);
    expect(
      (await api(ownerToken, "POST", endpoints, { path: "e", targets: [target] })).status,
    ).toBe(201);
    expect(
      (await api(ownerToken, "POST", endpoints, { path: "e", targets: [target] })).status,
    ).toBe(409);
  });
});

describe("keys", () => {
  test("a minted key is shown once; the list never shows plaintext or hash", async () => {
    const { slug, ownerToken } = await newProject();
    const minted = await api(ownerToken, "POST", `/projects/${slug}/keys`, {
      name: "ci",
      mode: "test",
      ttlDays: 30,
    });
    expect(minted.status).toBe(201);
    expect(minted.body.plaintext).toMatch(/^rk_test_[A-Za-z0-9_-]{43}$/);
    expect(minted.body.key).toMatchObject({
      name: "ci",
      mode: "test",
      status: "active",
      predecessorId: null,
      successorId: null,
    });
    const list = await api(ownerToken, "GET", `/projects/${slug}/keys`);
    expect(list.text).not.toContain(minted.body.plaintext as string);
    expect(list.text).not.toMatch(/hash/i);
    expect(list.body.keys).toHaveLength(1);
  });

  test("a bad mint is 400: unknown mode, ttlDays out of 1..3650", async () => {
    const { slug, ownerToken } = await newProject();
    for (const body of [
      { name: "x", mode: "prod" },
      { name: "x", mode: "live", ttlDays: 0 },
      { name: "x", mode: "live", ttlDays: 3651 },
    ]) {
      expect((await api(ownerToken, "POST", `/projects/${slug}/keys`, body)).status).toBe(400);
    }
  });
});
