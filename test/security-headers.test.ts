/**
 * The headers every control-plane answer carries, seen from outside: REST, Connect, gRPC over
 * h2c, ops and the panel are never content-sniffed nor framed, and no API answer (several carry
 * a secret shown once) is kept by a browser's or a proxy's cache.
 */
import { connect as connectHttp2 } from "node:http2";
import { connect as connectTcp } from "node:net";
import { request } from "undici";
import { expect, test } from "vitest";
import { api, newProject, projectWithEndpoint, relay, stack } from "./helpers.ts";

type Headers = Record<string, string | string[] | undefined>;

function expectNotSniffedNorFramed(headers: Headers) {
  expect(headers["x-content-type-options"]).toBe("nosniff");
  expect(String(headers["content-security-policy"])).toContain("frame-ancestors 'none'");
}

function expectApiAnswer(headers: Headers) {
  expectNotSniffedNorFramed(headers);
  expect(headers["cache-control"]).toBe("no-store");
}

/** A Connect unary call in JSON, as connect-web's transport makes it. */
async function connectCall(token: string | null, method: string, body: unknown) {
  const response = await request(`${stack().controlUrl}/relay.v1.${method}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token && { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  });
  return {
    status: response.statusCode,
    headers: response.headers,
    body: await response.body.json(),
  };
}

test("REST answers and refusals alike are nosniff, unframed and no-store", async () => {
  const { slug, ownerToken } = await newProject();
  const answers = [
    await api(ownerToken, "GET", "/projects"),
    await api(null, "GET", "/projects"),
    await api(ownerToken, "GET", "/no/such/route"),
    await api(ownerToken, "POST", `/projects/${slug}/keys`, "{not json"),
    await api(stack().adminToken, "GET", "/healthz"),
    await api(null, "GET", "/openapi.json"),
  ];
  expect(answers.map((a) => a.status)).toEqual([200, 401, 404, 400, 200, 200]);
  for (const answer of answers) expectApiAnswer(answer.headers);
});

/** What a call that shows a secret once answered, by what it is, and the field holding the secret. */
type ShownOnce = Record<string, [{ status: number; headers: Headers; body: unknown }, string]>;

function expectEachNoStore(secretsShownOnce: ShownOnce) {
  for (const [what, [answer, field]] of Object.entries(secretsShownOnce)) {
    const secret = (answer.body as Record<string, unknown>)[field];
    expect({ what, ok: answer.status < 300, secret: typeof secret }).toEqual({
      what,
      ok: true,
      secret: "string",
    });
    expectApiAnswer(answer.headers);
  }
}

const idOf = (answer: { body: unknown }, field: string) =>
  ((answer.body as Record<string, { id: string }>)[field] as { id: string }).id;

const target = { name: "t", targetUrl: "https://example.com/hook" };

test("every REST answer that shows a secret once is no-store", async () => {
  const p = await projectWithEndpoint([target]);
  const post = (path: string, body?: unknown) =>
    api(p.ownerToken, "POST", `${p.base}${path}`, body);
  const minted = await post("/keys", { name: "k", mode: "live" });
  // Two days from expiry: the auto-rotation seals a successor for it, to reveal once.
  const due = await post("/keys", { name: "due", mode: "live", ttlDays: 2 });
  expect((await api(stack().adminToken, "POST", "/admin/rotation/run")).status).toBe(200);
  const member = await post("/members", { name: "m", role: "editor" });
  expectEachNoStore({
    "key minted": [minted, "plaintext"],
    "key rotated": [await post(`/keys/${idOf(minted, "key")}/rotate`), "plaintext"],
    "successor revealed": [await post(`/keys/${idOf(due, "key")}/reveal-successor`), "plaintext"],
    "member added": [member, "token"],
    "member token rotated": [
      await post(`/members/${idOf(member, "member")}/rotate-token`),
      "token",
    ],
    "endpoint created": [
      await post("/lines/v1/endpoints", { path: "second", targets: [target] }),
      "signingSecret",
    ],
    "signing secret rotated": [
      await post("/lines/v1/endpoints/hook/signing-secret/rotate", {}),
      "signingSecret",
    ],
    "notifications set": [
      await api(p.ownerToken, "PUT", `${p.base}/notifications`, {
        url: "https://hooks.example.com/relay-events",
      }),
      "secret",
    ],
    "notification secret rotated": [await post("/notifications/rotate-secret"), "secret"],
  });
});

test("every Connect answer that shows a secret once is no-store, and so is a refusal", async () => {
  const p = await projectWithEndpoint([target]);
  const call = (method: string, body: Record<string, unknown> = {}) =>
    connectCall(p.ownerToken, method, { project: p.slug, ...body });
  const minted = await call("KeyService/MintKey", { name: "k", mode: "KEY_MODE_LIVE" });
  const member = await call("MemberService/AddMember", { name: "m", role: "ROLE_EDITOR" });
  const notifications = await call("NotificationService/SetNotifications", {
    url: "https://hooks.example.com/relay-events",
  });
  expectEachNoStore({
    "key minted": [minted, "plaintext"],
    "key rotated": [
      await call("KeyService/RotateKey", { keyId: idOf(minted, "key") }),
      "plaintext",
    ],
    "member added": [member, "token"],
    "member token rotated": [
      await call("MemberService/RotateMemberToken", { memberId: idOf(member, "member") }),
      "token",
    ],
    "endpoint created": [
      await call("EndpointService/CreateEndpoint", {
        line: "v1",
        endpoint: { path: "second", targets: [{ ...target, deliveryMode: "DELIVERY_MODE_ASYNC" }] },
      }),
      "signingSecret",
    ],
    "signing secret rotated": [
      await call("EndpointService/RotateSigningSecret", { line: "v1", path: "hook" }),
      "signingSecret",
    ],
    "notifications set": [notifications, "secret"],
    "notification secret rotated": [
      await call("NotificationService/RotateNotificationSecret"),
      "secret",
    ],
  });
  // No successor is sealed here: the reveal is refused, with the same headers as its answer.
  const reveal = await call("KeyService/RevealSuccessor", { keyId: idOf(minted, "key") });
  expect(reveal.status).toBe(404);
  expectApiAnswer(reveal.headers);

  const refused = await connectCall(null, "ProjectService/ListProjects", {});
  expect(refused.status).toBe(401);
  expectApiAnswer(refused.headers);

  const unknown = await connectCall(p.ownerToken, "ProjectService/NoSuchMethod", {});
  expect(unknown.status).toBe(404);
  expectApiAnswer(unknown.headers);
});

test("a gRPC answer over h2c carries the same headers", async () => {
  const { ownerToken } = await newProject();
  const session = connectHttp2(stack().controlUrl);
  try {
    const headers = await new Promise<Headers>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/relay.v1.ProjectService/ListProjects",
        "content-type": "application/grpc",
        te: "trailers",
        authorization: `Bearer ${ownerToken}`,
      });
      stream.on("response", (h) => resolve(h as Headers));
      stream.on("error", reject);
      // One empty message: not compressed, length 0.
      stream.end(Buffer.alloc(5));
      stream.resume();
    });
    expect(headers[":status"]).toBe(200);
    expectApiAnswer(headers);
  } finally {
    session.close();
  }
});

test("the panel's pages are nosniff and unframed, and so is a request the server cannot parse", async () => {
  const page = await request(`${stack().controlUrl}/panel/demo/requests/%ZZ`);
  await page.body.text();
  expect(page.statusCode).toBe(200);
  expectNotSniffedNorFramed(page.headers);

  // An empty Host on a Connect path: connect-node cannot parse the URL; the server answers 400.
  const { hostname, port } = new URL(stack().controlUrl);
  const head = await new Promise<string>((resolve, reject) => {
    const socket = connectTcp(Number(port), hostname, () =>
      socket.write(
        "POST /relay.v1.ProjectService/ListProjects HTTP/1.1\r\nHost:\r\n" +
          "Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
      ),
    );
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => {
      text += chunk;
    });
    socket.on("end", () => resolve(text.split("\r\n\r\n")[0] ?? ""));
    socket.on("error", reject);
  });
  expect(head).toMatch(/^HTTP\/1\.1 400 /);
  const headers = Object.fromEntries(
    head
      .split("\r\n")
      .slice(1)
      .map((line) => {
        const at = line.indexOf(":");
        return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()];
      }),
  );
  expectApiAnswer(headers);
});

test("the edge's own answers (202, 401, 404, 415) are nosniff and no-store", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/in" }]);
  const answers = [
    await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" }),
    await relay(p.slug, "/v1/hook", { key: "rk_live_wrong", body: "{}" }),
    await relay(p.slug, "/v1/nowhere", { key: p.key, body: "{}" }),
    await relay(p.slug, "/v1/hook", { key: p.key, body: "{" }),
  ];
  expect(answers.map((a) => a.status)).toEqual([202, 401, 404, 415]);
  for (const answer of answers) {
    expect(answer.headers["x-content-type-options"]).toBe("nosniff");
    expect(answer.headers["cache-control"]).toBe("no-store");
  }
});
