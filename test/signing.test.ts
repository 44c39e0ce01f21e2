/**
 * Signed deliveries, checked as a customer would: with the `standardwebhooks` library and the
 * secret the create (or rotate) answer showed once. Async and sync deliveries are signed by the
 * worker, streams by the edge; a rotation signs with both secrets for its overlap, then with the
 * new one only.
 */
import { toJsonString } from "@bufbuild/protobuf";
import { afterAll, describe, expect, test } from "vitest";
import { EndpointService, GetEndpointResponseSchema } from "../gen/relay/v1/routing_pb.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  mintKey,
  newProject,
  type Received,
  relay,
  stack,
  targetServer,
  verifiesSignature,
} from "./helpers.ts";

const queued = await targetServer();
const streamed = await targetServer();
const answering = await targetServer();
afterAll(() => Promise.all([queued.close(), streamed.close(), answering.close()]));

type Endpoint = { path: string; targets: unknown[]; signingSecret?: string };
type Rotated = { signingSecret: string; previousExpiresAt: string | null };

const admin = (path: string, body: unknown) => api(stack().adminToken, "POST", path, body);
/** Moves the shared dev clock; answers the stack's time once every edge runs on it. */
async function advanceClock(seconds: number): Promise<number> {
  const moved = await admin("/admin/clock", { advanceSeconds: seconds });
  expect(moved.status, moved.text).toBe(200);
  return moved.body.offsetMs as number;
}

/**
 * A project with two endpoints: `mixed` (an async target and a stream target, both delivered by
 * one call) and `rpc` (a sync target), each with the secret its create answer showed.
 */
async function setup() {
  const project = await newProject("paid");
  const base = `/projects/${project.slug}`;
  await api(project.ownerToken, "POST", `${base}/lines`, { key: "v1" });
  const create = async (path: string, targets: unknown[]) => {
    const created = await api<Endpoint>(project.ownerToken, "POST", `${base}/lines/v1/endpoints`, {
      path,
      targets,
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    return created.body.signingSecret as string;
  };
  const secrets = {
    mixed: await create("mixed", [
      { name: "queued", targetUrl: queued.url },
      { name: "streamed", targetUrl: streamed.url, deliveryMode: "stream" },
    ]),
    rpc: await create("rpc", [
      { name: "answering", targetUrl: answering.url, deliveryMode: "sync" },
    ]),
  };
  const ctx = { ...project, base };
  const key = await mintKey(ctx, "live");
  const received = (server: { received: Received[] }, requestId: string) =>
    server.received.find((r) => r.headers["x-relay-request-id"] === requestId);

  /** One call to each endpoint; the three deliveries as the targets received them. */
  async function deliverAll(body: string) {
    const mixed = await relay(project.slug, "/v1/mixed", { key, body });
    expect(mixed.status).toBe(200);
    const mixedId = mixed.headers["x-relay-request-id"] as string;
    await finishedLog(ctx, mixedId);
    const rpc = await relay(project.slug, "/v1/rpc", { key, body });
    expect(rpc.status).toBe(200);
    const rpcId = rpc.headers["x-relay-request-id"] as string;
    return {
      async: await eventually(async () => received(queued, mixedId)),
      stream: await eventually(async () => received(streamed, mixedId)),
      sync: await eventually(async () => received(answering, rpcId)),
    };
  }
  return { ...ctx, secrets, key, deliverAll };
}

const rotate = (p: { base: string }, token: string, path: string, body?: unknown) =>
  api<Rotated>(token, "POST", `${p.base}/lines/v1/endpoints/${path}/signing-secret/rotate`, body);

describe("signed deliveries", () => {
  test("async, sync and stream deliveries verify with the endpoint's secret as shown once", async () => {
    const p = await setup();
    const deliveries = await p.deliverAll('{"order":7,"note":"ünïcode"}');
    for (const [mode, delivery] of Object.entries(deliveries)) {
      const secret = mode === "sync" ? p.secrets.rpc : p.secrets.mixed;
      expect(await verifiesSignature(secret, delivery), `${mode} verifies`).toBe(true);
      expect(delivery.headers["webhook-id"]).toBe(delivery.headers["x-relay-delivery-id"]);
      expect(delivery.headers["webhook-timestamp"]).toMatch(/^\d{10}$/);
      expect((delivery.headers["webhook-signature"] as string).split(" ")).toHaveLength(1);
      // Each endpoint has its own secret.
      const other = mode === "sync" ? p.secrets.mixed : p.secrets.rpc;
      expect(
        await verifiesSignature(other, delivery),
        `${mode} with another endpoint's secret`,
      ).toBe(false);
    }
    // A caller's own signature headers never reach a target: Relay's replace them.
    const forged = await relay(p.slug, "/v1/rpc", {
      key: p.key,
      body: "{}",
      headers: { "webhook-signature": "v1,forged", "webhook-id": "msg_forged" },
    });
    const id = forged.headers["x-relay-request-id"];
    const sent = answering.received.find((r) => r.headers["x-relay-request-id"] === id);
    expect(sent?.headers["webhook-id"]).toBe(sent?.headers["x-relay-delivery-id"]);
    expect(sent?.headers["webhook-signature"]).not.toContain("forged");
    expect(await verifiesSignature(p.secrets.rpc, sent as Received)).toBe(true);
  });

  test("the secret is never readable again: not in a read, a list or the edge's answers", async () => {
    const p = await setup();
    const reads = [
      await api(p.ownerToken, "GET", `${p.base}/lines/v1/endpoints/mixed`),
      await api(p.ownerToken, "GET", `${p.base}/lines/v1/endpoints`),
      await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/rpc`, {
        targets: [{ name: "answering", targetUrl: answering.url, deliveryMode: "sync" }],
      }),
    ];
    for (const read of reads) {
      expect(read.status).toBe(200);
      expect(read.text).not.toContain("whsec_");
      expect(read.text).not.toContain("signingSecret");
    }
    // An edit keeps the secret: deliveries still verify with the one shown at creation.
    const { sync } = await p.deliverAll("{}");
    expect(await verifiesSignature(p.secrets.rpc, sync)).toBe(true);
  });

  test("after a rotation both secrets verify for the overlap; past it only the new one", async () => {
    const p = await setup();
    const editor = await api<{ token: string }>(p.ownerToken, "POST", `${p.base}/members`, {
      name: "ed",
      role: "editor",
    });
    const offsetMs = await advanceClock(0);
    // The editor rotates one endpoint, the owner the other.
    const mixed = await rotate(p, editor.body.token, "mixed", { overlapSeconds: 120 });
    const rpc = await rotate(p, p.ownerToken, "rpc", { overlapSeconds: 120 });
    for (const rotated of [mixed, rpc]) {
      expect(rotated.status, rotated.text).toBe(201);
      expect(rotated.body.signingSecret).toMatch(/^whsec_/);
      const expires = Date.parse(rotated.body.previousExpiresAt ?? "");
      expect(Math.abs(expires - (Date.now() + offsetMs + 120_000))).toBeLessThan(10_000);
    }
    expect(mixed.body.signingSecret).not.toBe(p.secrets.mixed);
    const fresh = { mixed: mixed.body.signingSecret, rpc: rpc.body.signingSecret };
    const secretsOf = (mode: string, s: { mixed: string; rpc: string }) =>
      mode === "sync" ? s.rpc : s.mixed;

    const during = await p.deliverAll('{"phase":"overlap"}');
    for (const [mode, delivery] of Object.entries(during)) {
      expect((delivery.headers["webhook-signature"] as string).split(" ")).toHaveLength(2);
      expect(await verifiesSignature(secretsOf(mode, p.secrets), delivery), `${mode}, old`).toBe(
        true,
      );
      expect(await verifiesSignature(secretsOf(mode, fresh), delivery), `${mode}, new`).toBe(true);
    }

    await advanceClock(121);
    const after = await p.deliverAll('{"phase":"after"}');
    for (const [mode, delivery] of Object.entries(after)) {
      expect((delivery.headers["webhook-signature"] as string).split(" ")).toHaveLength(1);
      expect(await verifiesSignature(secretsOf(mode, p.secrets), delivery), `${mode}, old`).toBe(
        false,
      );
      expect(await verifiesSignature(secretsOf(mode, fresh), delivery), `${mode}, new`).toBe(true);
    }
  });

  test("the overlap defaults to 24 h, and a second rotation never extends an earlier one", async () => {
    const p = await setup();
    const offsetMs = await advanceClock(0);
    const first = await rotate(p, p.ownerToken, "rpc");
    expect(first.status, first.text).toBe(201);
    const expires = Date.parse(first.body.previousExpiresAt ?? "");
    expect(Math.abs(expires - (Date.now() + offsetMs + 86_400_000))).toBeLessThan(10_000);
    // A rotation with no overlap: the secret shown at creation stops at once (its end is not
    // moved later), the first rotation's secret stops at once too.
    const second = await rotate(p, p.ownerToken, "rpc", { overlapSeconds: 0 });
    expect(second.status, second.text).toBe(201);
    const { sync } = await p.deliverAll("{}");
    expect((sync.headers["webhook-signature"] as string).split(" ")).toHaveLength(1);
    expect(await verifiesSignature(second.body.signingSecret, sync)).toBe(true);
    expect(await verifiesSignature(first.body.signingSecret, sync)).toBe(false);
    expect(await verifiesSignature(p.secrets.rpc, sync)).toBe(false);
  });

  test("RotateSigningSecret over Connect answers the new secret once", async () => {
    const p = await setup();
    const client = memberClient(EndpointService, p.ownerToken);
    const rotated = await client.rotateSigningSecret({
      project: p.slug,
      line: "v1",
      path: "rpc",
      overlapSeconds: 60,
    });
    expect(rotated.signingSecret).toMatch(/^whsec_/);
    expect(rotated.previousExpiresAt).toBeDefined();
    const { sync } = await p.deliverAll("{}");
    expect(await verifiesSignature(rotated.signingSecret, sync)).toBe(true);
    expect(await verifiesSignature(p.secrets.rpc, sync)).toBe(true);

    const created = await client.createEndpoint({
      project: p.slug,
      line: "v1",
      endpoint: { path: "made-over-connect", targets: [{ name: "t", targetUrl: queued.url }] },
    });
    expect(created.signingSecret).toMatch(/^whsec_/);
    const read = await client.getEndpoint({
      project: p.slug,
      line: "v1",
      path: "made-over-connect",
    });
    expect(toJsonString(GetEndpointResponseSchema, read)).not.toContain("whsec_");
  });
});

describe("rotation refusals", () => {
  test("an unknown endpoint or line is 404", async () => {
    const p = await setup();
    for (const [line, path] of [
      ["v1", "nope"],
      ["v9", "mixed"],
    ]) {
      const answer = await api(
        p.ownerToken,
        "POST",
        `${p.base}/lines/${line}/endpoints/${path}/signing-secret/rotate`,
        {},
      );
      expect(answer.status).toBe(404);
      expect(answer.body).toMatchObject({ error: { code: "not_found" } });
    }
  });

  test("a bad overlapSeconds is 400 with details, and rotates nothing", async () => {
    const p = await setup();
    for (const overlapSeconds of [-1, 604_801, 1.5, "60", null]) {
      const answer = await rotate(p, p.ownerToken, "rpc", { overlapSeconds });
      expect(answer.status, JSON.stringify(overlapSeconds)).toBe(400);
      expect(answer.body).toMatchObject({
        error: { code: "bad_request", details: [{ path: "overlapSeconds" }] },
      });
    }
    const unknown = await rotate(p, p.ownerToken, "rpc", { overlap: 60 });
    expect(unknown.status).toBe(400);
    expect((await rotate(p, p.ownerToken, "rpc", { overlapSeconds: 604_800 })).status).toBe(201);
    const { sync } = await p.deliverAll("{}");
    // Only the one good rotation happened: the original and one new secret sign.
    expect((sync.headers["webhook-signature"] as string).split(" ")).toHaveLength(2);
  });

  test("an editor of another project gets 404; no token gets 401", async () => {
    const p = await setup();
    const other = await newProject("paid");
    const editor = await api<{ token: string }>(
      other.ownerToken,
      "POST",
      `/projects/${other.slug}/members`,
      { name: "ed", role: "editor" },
    );
    expect(editor.status).toBe(201);
    const answer = await rotate(p, editor.body.token, "rpc", {});
    expect(answer.status).toBe(404);
    expect(answer.text).not.toContain("whsec_");
    expect((await rotate(p, "", "rpc", {})).status).toBe(401);
  });
});
