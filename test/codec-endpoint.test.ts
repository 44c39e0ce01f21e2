/**
 * The codec endpoint (Temporal's Codec Server protocol under /codec): what Relay hands Temporal
 * is sealed, so a request's history read through Temporal's own API shows neither its body nor
 * its targets' headers; an operator (the admin or operator token, or their session cookie)
 * opens it through the endpoint, and nobody else does. The browser's side (the Temporal UI):
 * CORS for the UI's origin only, and the session cookie.
 */
import { randomBytes } from "node:crypto";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { jsonPayload, PayloadCipher, payloadToJson } from "../core/payload-codec.ts";
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import {
  api,
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  stackLog,
  targetServer,
} from "./helpers.ts";

interface PayloadJson {
  metadata?: Record<string, string>;
  data?: string;
}

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

/** A call to the codec endpoint; `headers` as the UI or the CLI sends them. */
async function codec(
  method: string,
  path: string,
  options: { token?: string | null; headers?: Record<string, string>; body?: string | Buffer } = {},
) {
  const answer = await request(`${stack().controlUrl}${path}`, {
    method: method as "POST",
    headers: {
      ...(options.token && { authorization: `Bearer ${options.token}` }),
      ...(options.body !== undefined && { "content-type": "application/json" }),
      ...options.headers,
    },
    ...(options.body !== undefined && { body: options.body }),
  });
  const text = await answer.body.text();
  return { status: answer.statusCode, headers: answer.headers, text, json: () => JSON.parse(text) };
}

const decode = (payloads: PayloadJson[], token: string | null, path = "/codec/decode") =>
  codec("POST", path, { token, body: JSON.stringify({ payloads }) });

const fromBase64 = (text: string) => Buffer.from(text, "base64").toString("utf8");

/**
 * Every base64 form `secret` can take inside a longer base64 text: its bytes may start at any of
 * the three offsets of a 3-byte group. The groups that hold only the secret's bytes are checked.
 */
function base64Forms(secret: string): string[] {
  return [0, 1, 2].map((offset) =>
    Buffer.concat([Buffer.alloc(offset), Buffer.from(secret)])
      .toString("base64")
      .slice(4, -4),
  );
}

/** A delivered request whose body and target header hold secrets, and its history's input. */
async function sealedDelivery() {
  const bodySecret = `card-4111111111111111-${randomBytes(12).toString("hex")}`;
  const headerSecret = `target-secret-${randomBytes(12).toString("hex")}`;
  const target = await targetServer();
  closers.push(target.close);
  const p = await projectWithEndpoint([
    {
      name: "billing",
      targetUrl: target.url,
      headers: { authorization: `Bearer ${headerSecret}` },
    },
  ]);
  const sent = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: JSON.stringify({ card: bodySecret }),
  });
  expect(sent.status).toBe(202);
  const { requestId } = sent.json() as { requestId: string };
  const log = await finishedLog(p, requestId);
  expect(log.status).toBe("delivered");
  const history = await request(
    `${stack().temporalHttpAddress}/api/v1/namespaces/default/workflows/${encodeURIComponent(requestId)}/history?noPayloadShorthand`,
  );
  const historyText = await history.body.text();
  expect(history.statusCode).toBe(200);
  const events = JSON.parse(historyText).history.events as {
    workflowExecutionStartedEventAttributes?: { input?: { payloads: PayloadJson[] } };
  }[];
  const input = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  return { p, requestId, bodySecret, headerSecret, historyText, input };
}

let delivery: Awaited<ReturnType<typeof sealedDelivery>>;
beforeAll(async () => {
  delivery = await sealedDelivery();
}, 60_000);

test("a request's history, read through Temporal's API, holds neither its body nor a target header's value", () => {
  const { historyText, bodySecret, headerSecret, input } = delivery;
  expect(input.length).toBeGreaterThan(0);
  for (const secret of [bodySecret, headerSecret]) {
    expect(historyText).not.toContain(secret);
    for (const form of base64Forms(secret)) expect(historyText).not.toContain(form);
  }
  expect(fromBase64(input[0]?.metadata?.encoding ?? "")).toBe("binary/encrypted");
});

/** The delivery input the codec endpoint opened: the JSON and the body it carries. */
function openedInput(payloads: PayloadJson[]) {
  const [first] = payloads;
  expect(fromBase64(first?.metadata?.encoding ?? "")).toBe("json/plain");
  const text = fromBase64(first?.data ?? "");
  const value = JSON.parse(text) as { bodyBase64: string };
  return { text, body: fromBase64(value.bodyBase64) };
}

test("the admin token opens the input through /codec/decode: the body and the target's header are there", async () => {
  const answer = await decode(delivery.input, stack().adminToken);
  expect(answer.status).toBe(200);
  expect(answer.headers["content-type"]).toMatch(/^application\/json/);
  const { text, body } = openedInput(answer.json().payloads);
  expect(text).toContain(delivery.headerSecret);
  expect(body).toContain(delivery.bodySecret);
});

test("the operator token opens it too, on a namespace's path as the UI calls it", async () => {
  const answer = await codec("POST", "/codec/default/decode", {
    token: stack().operatorToken,
    headers: { "x-namespace": "default" },
    body: JSON.stringify({ payloads: delivery.input }),
  });
  expect(answer.status).toBe(200);
  expect(openedInput(answer.json().payloads).text).toContain(delivery.headerSecret);
});

test("a member token, a wrong token and no token are all 401, and the answer opens nothing", async () => {
  const wrong = `radm_${randomBytes(32).toString("base64url")}`;
  for (const token of [delivery.p.ownerToken, wrong, null]) {
    const answer = await decode(delivery.input, token);
    expect(answer.status).toBe(401);
    expect(answer.json()).toEqual({
      error: { code: "unauthenticated", message: "missing or invalid token" },
    });
    expect(answer.text).not.toContain(delivery.headerSecret);
  }
  // The operator token is the codec endpoint's only: the management API refuses it.
  expect((await api(stack().operatorToken, "GET", "/projects")).status).toBe(401);
});

test("encode then decode gives the payloads back; an unsealed payload decodes as it is", async () => {
  const plain = payloadToJson(jsonPayload({ hello: "relay" }));
  const encoded = await codec("POST", "/codec/encode", {
    token: stack().adminToken,
    body: JSON.stringify({ payloads: [plain] }),
  });
  expect(encoded.status).toBe(200);
  const [sealed] = encoded.json().payloads as PayloadJson[];
  expect(fromBase64(sealed?.metadata?.encoding ?? "")).toBe("binary/encrypted");
  expect(sealed?.metadata?.["encryption-key-id"]).toBeTruthy();
  const decoded = await decode([sealed as PayloadJson, plain], stack().adminToken);
  expect(decoded.status).toBe(200);
  expect(decoded.json()).toEqual({ payloads: [plain, plain] });
});

test("a payload sealed with a key this deployment does not have is 422, naming the key id", async () => {
  const other = await PayloadCipher.fromSecrets([randomBytes(32).toString("hex")]);
  const [sealed] = await other.encode([jsonPayload({ hello: "elsewhere" })]);
  const answer = await decode([payloadToJson(sealed ?? {})], stack().adminToken);
  expect(answer.status).toBe(422);
  expect(answer.json().error.code).toBe("validation_failed");
  expect(answer.json().error.message).toContain(other.keyId);
});

describe("bad input is a 400 with the error body", () => {
  test.each([
    ["malformed JSON", "{"],
    ["no payloads", "{}"],
    ["payloads not a list", '{"payloads":"x"}'],
    ["data not base64", '{"payloads":[{"metadata":{},"data":"!!!"}]}'],
    ["metadata not base64", '{"payloads":[{"metadata":{"encoding":"%%"},"data":""}]}'],
    ["a payload not an object", '{"payloads":[1]}'],
  ])("%s", async (_, body) => {
    const answer = await codec("POST", "/codec/decode", { token: stack().adminToken, body });
    expect(answer.status).toBe(400);
    expect(answer.json().error.code).toBe("bad_request");
  });

  test("more payloads than a call may carry", async () => {
    const payloads = Array.from({ length: 1001 }, () => ({ metadata: {}, data: "" }));
    const answer = await decode(payloads, stack().adminToken);
    expect(answer.status).toBe(400);
    expect(answer.json().error.message).toContain("1000");
  });

  test("a body over 16 MiB is 413", async () => {
    const answer = await codec("POST", "/codec/decode", {
      token: stack().adminToken,
      body: Buffer.alloc(16 * 1024 * 1024 + 1, 0x20),
    });
    expect(answer.status).toBe(413);
    expect(answer.json().error.code).toBe("payload_too_large");
  });

  test("a path under /codec that is no codec call is 404", async () => {
    const answer = await codec("POST", "/codec/default/transmogrify", {
      token: stack().adminToken,
      body: '{"payloads":[]}',
    });
    expect(answer.status).toBe(404);
  });
});

describe("the Temporal UI's side", () => {
  const uiOrigin = () => new URL(stack().temporalUiUrl ?? "").origin;
  const preflight = (origin: string) =>
    codec("OPTIONS", "/codec/default/decode", {
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-namespace",
      },
    });

  test("a preflight from the UI's origin is allowed, with credentials", async () => {
    const answer = await preflight(uiOrigin());
    expect(answer.status).toBe(204);
    expect(answer.headers["access-control-allow-origin"]).toBe(uiOrigin());
    expect(answer.headers["access-control-allow-credentials"]).toBe("true");
    expect(answer.headers["access-control-allow-methods"]).toContain("POST");
    const allowed = String(answer.headers["access-control-allow-headers"]).toLowerCase();
    for (const name of ["content-type", "x-namespace", "authorization"]) {
      expect(allowed).toContain(name);
    }
  });

  test("a preflight or a call from any other origin gets no CORS headers", async () => {
    const other = await preflight("http://evil.example");
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    expect(other.headers["access-control-allow-credentials"]).toBeUndefined();
    const call = await codec("POST", "/codec/decode", {
      token: stack().adminToken,
      headers: { origin: "http://evil.example" },
      body: '{"payloads":[]}',
    });
    expect(call.headers["access-control-allow-origin"]).toBeUndefined();
    const fromUi = await codec("POST", "/codec/decode", {
      token: stack().adminToken,
      headers: { origin: uiOrigin() },
      body: '{"payloads":[]}',
    });
    expect(fromUi.headers["access-control-allow-origin"]).toBe(uiOrigin());
  });

  test("the stack's Temporal UI is wired to the endpoint (what npm start runs)", async () => {
    const settings = await request(`${stack().temporalUiUrl}/api/v1/settings`);
    const { Codec } = (await settings.body.json()) as { Codec: { Endpoint: string } };
    expect(Codec.Endpoint).toBe(`${stack().controlUrl}/codec`);
  });

  test("GET /codec is a sign-in page with no script and no outside asset", async () => {
    const page = await codec("GET", "/codec");
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.text).toContain('<form method="post" action="/codec/session"');
    expect(page.text).not.toMatch(/<script|https?:\/\//);
    expect(page.headers["content-security-policy"]).toContain("frame-ancestors 'none'");
  });

  /** The `name=value` of a Set-Cookie answer. */
  const cookieOf = (setCookie: string | string[] | undefined) =>
    String(Array.isArray(setCookie) ? setCookie[0] : setCookie).split(";")[0] ?? "";

  test("a session: signed in with the admin token, the cookie alone decodes; signed out, it does not", async () => {
    const signedIn = await codec("POST", "/codec/session", { token: stack().adminToken });
    expect(signedIn.status).toBe(200);
    expect(Date.parse(signedIn.json().expiresAt)).toBeGreaterThan(Date.now() + 11 * 3600_000);
    const setCookie = String(signedIn.headers["set-cookie"]);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\/codec/);
    expect(setCookie).not.toMatch(/Secure/);
    expect(setCookie).not.toContain(stack().adminToken);
    const cookie = cookieOf(signedIn.headers["set-cookie"]);

    const decoded = await codec("POST", "/codec/decode", {
      headers: { cookie },
      body: JSON.stringify({ payloads: delivery.input }),
    });
    expect(decoded.status).toBe(200);
    expect(openedInput(decoded.json().payloads).text).toContain(delivery.headerSecret);

    // A cookie whose expiry was moved is no session.
    const [name, value = ""] = cookie.split("=");
    const [version, expiry, nonce, mac] = value.split(".");
    const forged = `${name}=${version}.${Number(expiry) + 3600}.${nonce}.${mac}`;
    const refused = await codec("POST", "/codec/decode", {
      headers: { cookie: forged },
      body: '{"payloads":[]}',
    });
    expect(refused.status).toBe(401);

    const signedOut = await codec("DELETE", "/codec/session", { headers: { cookie } });
    expect(signedOut.status).toBe(204);
    expect(String(signedOut.headers["set-cookie"])).toMatch(/Max-Age=0/);
    // The cookie, kept (copied before the sign-out), opens nothing any more.
    const kept = await codec("POST", "/codec/decode", {
      headers: { cookie },
      body: JSON.stringify({ payloads: delivery.input }),
    });
    expect(kept.status).toBe(401);
  });

  test("the sign-in form with the operator token sets the cookie (Secure behind https) and goes back to the page", async () => {
    const signedIn = await codec("POST", "/codec/session", {
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "x-forwarded-proto": "https",
      },
      body: `token=${encodeURIComponent(stack().operatorToken)}`,
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.location).toBe("/codec");
    expect(String(signedIn.headers["set-cookie"])).toMatch(/; Secure/);
    const page = await codec("GET", "/codec", {
      headers: { cookie: cookieOf(signedIn.headers["set-cookie"]) },
    });
    expect(page.text).toContain("Signed in until");
  });

  test("the form with a wrong token shows the page again; a form another site posts is refused", async () => {
    const form = (token: string, site: string) =>
      codec("POST", "/codec/session", {
        headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": site },
        body: `token=${encodeURIComponent(token)}`,
      });
    const wrong = await form(delivery.p.ownerToken, "same-origin");
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("That is not the admin or the operator token.");
    expect(wrong.headers["set-cookie"]).toBeUndefined();
    const crossSite = await form(stack().adminToken, "cross-site");
    expect(crossSite.status).toBe(403);
    expect(crossSite.headers["set-cookie"]).toBeUndefined();
  });

  test("a session needs an operator's token: a member's is refused", async () => {
    const answer = await codec("POST", "/codec/session", { token: delivery.p.ownerToken });
    expect(answer.status).toBe(401);
    expect(answer.headers["set-cookie"]).toBeUndefined();
  });
});

describe("the panel's link to the Temporal UI", () => {
  const project = (controlUrl: string, token: string) =>
    api<{ workflowsUrl: string }>(token, "GET", delivery.p.base, undefined, controlUrl);

  test("members get no link unless the deployment declares its UI member-safe; the admin does", async () => {
    const workflows = `${stack().temporalUiUrl}/namespaces/default/workflows`;
    expect((await project(stack().controlUrl, delivery.p.ownerToken)).body.workflowsUrl).toBe("");
    expect((await project(stack().controlUrl, stack().adminToken)).body.workflowsUrl).toBe(
      workflows,
    );

    const [port = 0] = await freePorts(1);
    const memberSafe = new ManagedProcess(
      {
        name: "control-member-safe-ui",
        entry: "control/main.ts",
        readyLine: "control plane listening",
        env: {
          DATABASE_URL: stack().databaseUrl,
          TEMPORAL_ADDRESS: stack().temporalAddress,
          RELAY_CONTROL_PORT: String(port),
          RELAY_ADMIN_TOKEN: stack().adminToken,
          RELAY_EDGE_TOKEN: stack().edgeToken,
          RELAY_ENCRYPTION_KEY: stack().encryptionKey,
          RELAY_TEMPORAL_UI_URL: stack().temporalUiUrl ?? "",
          RELAY_TEMPORAL_UI_MEMBER_SAFE: "1",
        },
      },
      stackLog(),
    );
    await memberSafe.start();
    closers.push(() => memberSafe.stop());
    const answer = await project(`http://127.0.0.1:${port}`, delivery.p.ownerToken);
    expect(answer.body.workflowsUrl).toBe(workflows);
  }, 60_000);
});
