/**
 * A target's flow control and secret headers as configured (issue 28): REST and Connect create,
 * update and read them, refuse them out of bounds or on a target that answers its caller, and the
 * edge's own read of the endpoint (what a workflow's input is built from) carries them.
 */
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, test } from "vitest";
import { connectControlPlane } from "../edge/control.ts";
import { DeliveryMode, EndpointService } from "../gen/relay/v1/routing_pb.ts";
import { api, memberClient, newProject, projectWithEndpoint, stack } from "./helpers.ts";

const target = { name: "t", targetUrl: "http://127.0.0.1:9/in" };
const limited = {
  name: "limited",
  targetUrl: "http://127.0.0.1:9/limited",
  maxDeliveriesPerSecond: 20,
  maxConcurrent: 5,
  secretHeaders: ["X-Api-Token", "x-api-token", "Authorization", "X-Signature"],
};

async function projectWithLine() {
  const project = await newProject();
  await api(project.ownerToken, "POST", `/projects/${project.slug}/lines`, { key: "v1" });
  return { ...project, endpoints: `/projects/${project.slug}/lines/v1/endpoints` };
}

describe("flow control and secret headers over REST", () => {
  test("round-trip: limits kept, secret headers lowercase and once each, none absent", async () => {
    const { ownerToken, endpoints } = await projectWithLine();
    const created = await api(ownerToken, "POST", endpoints, {
      path: "orders",
      targets: [limited, target],
    });
    expect(created.status).toBe(201);
    const [first, second] = created.body.targets as Record<string, unknown>[];
    expect(first).toMatchObject({
      maxDeliveriesPerSecond: 20,
      maxConcurrent: 5,
      secretHeaders: ["x-api-token", "x-signature"],
    });
    expect(second).not.toHaveProperty("maxDeliveriesPerSecond");
    expect(second).not.toHaveProperty("maxConcurrent");
    expect(second).not.toHaveProperty("secretHeaders");

    // An update replaces them: null lifts a limit, as leaving it out does.
    const updated = await api(ownerToken, "PUT", `${endpoints}/orders`, {
      targets: [{ ...limited, maxDeliveriesPerSecond: null, secretHeaders: [] }],
    });
    expect(updated.status).toBe(200);
    const [only] = updated.body.targets as Record<string, unknown>[];
    expect(only).toMatchObject({ maxConcurrent: 5 });
    expect(only).not.toHaveProperty("maxDeliveriesPerSecond");
    expect(only).not.toHaveProperty("secretHeaders");
    expect((await api(ownerToken, "GET", `${endpoints}/orders`)).body).toEqual(updated.body);
  });

  test.each([
    ["0 per second", { ...target, maxDeliveriesPerSecond: 0 }, "targets.0.maxDeliveriesPerSecond"],
    [
      "1001 per second",
      { ...target, maxDeliveriesPerSecond: 1001 },
      "targets.0.maxDeliveriesPerSecond",
    ],
    [
      "1.5 per second",
      { ...target, maxDeliveriesPerSecond: 1.5 },
      "targets.0.maxDeliveriesPerSecond",
    ],
    ["0 at once", { ...target, maxConcurrent: 0 }, "targets.0.maxConcurrent"],
    ["1001 at once", { ...target, maxConcurrent: 1001 }, "targets.0.maxConcurrent"],
    [
      "a sync target's rate",
      { ...target, deliveryMode: "sync", maxDeliveriesPerSecond: 5 },
      "targets.0.maxDeliveriesPerSecond",
    ],
    [
      "a stream target's concurrency",
      { ...target, deliveryMode: "stream", maxConcurrent: 5 },
      "targets.0.maxConcurrent",
    ],
    [
      "a secret header that is no header name",
      { ...target, secretHeaders: ["x token"] },
      "targets.0.secretHeaders.0",
    ],
    [
      "a secret header over 100 characters",
      { ...target, secretHeaders: ["x".repeat(101)] },
      "targets.0.secretHeaders.0",
    ],
    [
      "33 secret headers",
      { ...target, secretHeaders: Array.from({ length: 33 }, (_, i) => `x-${i}`) },
      "targets.0.secretHeaders",
    ],
  ])("%s is refused with 400 naming the field", async (_, spec, path) => {
    const { ownerToken, endpoints } = await projectWithLine();
    const answer = await api(ownerToken, "POST", endpoints, { path: "e", targets: [spec] });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      error: {
        code: "bad_request",
        message: expect.any(String),
        details: expect.arrayContaining([expect.objectContaining({ path })]),
      },
    });
  });

  test("the bounds themselves are taken: 1 and 1000, 32 names of 100 characters", async () => {
    const { ownerToken, endpoints } = await projectWithLine();
    const names = Array.from({ length: 32 }, (_, i) => `x-${i}`.padEnd(100, "a"));
    const answer = await api(ownerToken, "POST", endpoints, {
      path: "e",
      targets: [
        { ...target, maxDeliveriesPerSecond: 1000, maxConcurrent: 1, secretHeaders: names },
      ],
    });
    expect(answer.status).toBe(201);
    expect((answer.body.targets as { secretHeaders: string[] }[])[0]?.secretHeaders).toEqual(names);
  });
});

test("Connect creates, updates and reads them; a sync target's limit is invalid_argument", async () => {
  const { slug, ownerToken } = await projectWithLine();
  const endpoints = memberClient(EndpointService, ownerToken);
  const { endpoint } = await endpoints.createEndpoint({
    project: slug,
    line: "v1",
    endpoint: { path: "c", targets: [limited] },
  });
  expect(endpoint?.targets[0]).toMatchObject({
    maxDeliveriesPerSecond: 20,
    maxConcurrent: 5,
    secretHeaders: ["x-api-token", "x-signature"],
  });
  const update = { project: slug, line: "v1", path: "c" };
  const { endpoint: unlimited } = await endpoints.updateEndpoint({
    ...update,
    endpoint: { path: "c", targets: [target] },
  });
  expect(unlimited?.targets[0]?.maxDeliveriesPerSecond).toBeUndefined();
  expect(unlimited?.targets[0]?.maxConcurrent).toBeUndefined();
  expect(unlimited?.targets[0]?.secretHeaders).toEqual([]);
  const refused = await endpoints
    .updateEndpoint({
      ...update,
      endpoint: {
        path: "c",
        targets: [{ ...target, deliveryMode: DeliveryMode.SYNC, maxConcurrent: 2 }],
      },
    })
    .catch((e: unknown) => ConnectError.from(e));
  expect(refused).toMatchObject({ code: 3 /* invalid_argument */ });
  expect((refused as ConnectError).rawMessage).toContain("targets.0.maxConcurrent");
});

test("the edge's read of the endpoint carries them, as a workflow's input then does", async () => {
  const p = await projectWithEndpoint([limited, target]);
  const control = connectControlPlane({
    baseUrl: stack().controlUrl,
    edgeToken: stack().edgeToken,
    fetch,
  });
  const { endpoint } = await control.endpointState(p.slug, "v1", "hook");
  const state = await control.projectState(p.slug);
  for (const targets of [endpoint?.targets, state?.endpoints.get("v1/hook")?.targets]) {
    expect(targets?.[0]).toMatchObject({
      maxDeliveriesPerSecond: 20,
      maxConcurrent: 5,
      secretHeaders: ["x-api-token", "x-signature"],
    });
    expect(targets?.[1]).not.toHaveProperty("maxDeliveriesPerSecond");
    expect(targets?.[1]).not.toHaveProperty("maxConcurrent");
    expect(targets?.[1]).not.toHaveProperty("secretHeaders");
  }
});
