/**
 * The control plane against anonymous and malformed input: bodies are read only up to a limit
 * and never inflated past it (issue 12, item 6), a malformed path is a 400 and never reaches
 * Postgres (item 17), a connection that says nothing is closed (item 18), and metrics are not
 * served to whoever a same-host proxy passes on (item 19).
 */
import { connect as connectHttp2 } from "node:http2";
import { connect as connectTcp } from "node:net";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { request } from "undici";
import { describe, expect, test } from "vitest";
import { api, newProject, stack } from "./helpers.ts";

/** 64 MiB of zeros: about 64 kB gzipped, and much less as brotli. */
const ZEROS = Buffer.alloc(64 * 1024 * 1024);
const gzipBomb = gzipSync(ZEROS);
const listProjects = () => `${stack().controlUrl}/relay.v1.ProjectService/ListProjects`;

async function controlPlaneAnswers() {
  const health = await request(`${stack().controlUrl}/healthz`);
  await health.body.dump();
  return health.statusCode;
}

describe("bodies are read only up to a limit, before any token is checked", () => {
  test.each([
    ["gzip", gzipBomb],
    ["br", brotliCompressSync(ZEROS, { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } })],
  ])("a %s bomb on a Connect unary call is resource_exhausted", async (encoding, bomb) => {
    const answer = await request(listProjects(), {
      method: "POST",
      headers: { "content-type": "application/proto", "content-encoding": encoding },
      body: bomb,
    });
    expect(answer.statusCode).toBe(429);
    expect(await answer.body.json()).toMatchObject({ code: "resource_exhausted" });
    expect(await controlPlaneAnswers()).toBe(200);
  });

  test("an uncompressed Connect message over the limit is refused by its length", async () => {
    const answer = await request(listProjects(), {
      method: "POST",
      headers: { "content-type": "application/proto" },
      body: Buffer.alloc(2 * 1024 * 1024, 0x0a),
    });
    expect(answer.statusCode).toBe(429);
    expect(await answer.body.json()).toMatchObject({ code: "resource_exhausted" });
  });

  test("a compressed gRPC message is inflated no further than the limit", async () => {
    const session = connectHttp2(stack().controlUrl);
    try {
      const envelope = Buffer.alloc(5);
      envelope.writeUInt8(1, 0); // compressed
      envelope.writeUInt32BE(gzipBomb.length, 1);
      const call = session.request({
        ":method": "POST",
        ":path": "/relay.v1.ProjectService/ListProjects",
        "content-type": "application/grpc",
        "grpc-encoding": "gzip",
        te: "trailers",
      });
      call.end(Buffer.concat([envelope, gzipBomb]));
      const status = await new Promise<string | undefined>((resolve, reject) => {
        call.on("response", (headers) => {
          if (headers["grpc-status"] !== undefined) resolve(String(headers["grpc-status"]));
        });
        call.on("trailers", (trailers) => resolve(String(trailers["grpc-status"])));
        call.on("error", reject);
        call.resume();
      });
      expect(status).toBe("8"); // RESOURCE_EXHAUSTED
    } finally {
      session.close();
    }
    expect(await controlPlaneAnswers()).toBe(200);
  });

  test("REST: a compressed body is 415 and an announced length over 1 MiB is 413", async () => {
    const post = (headers: Record<string, string>, body: Buffer) =>
      request(`${stack().controlUrl}/projects`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${stack().adminToken}`,
          "content-type": "application/json",
          ...headers,
        },
        body,
      });
    const compressed = await post({ "content-encoding": "gzip" }, gzipBomb);
    expect(compressed.statusCode).toBe(415);
    expect(await compressed.body.json()).toMatchObject({
      error: { code: "unsupported_media_type" },
    });
    const large = await post({}, Buffer.alloc(2 * 1024 * 1024, 0x20));
    expect(large.statusCode).toBe(413);
    expect(await large.body.json()).toMatchObject({ error: { code: "payload_too_large" } });
  });
});

describe("malformed paths are 400 with the error body", () => {
  test.each([
    ["a malformed escape", "/requests/req_%E0"],
    ["a NUL byte", "/requests/req_%00"],
    ["a NUL byte in a key id", "/keys/key_%00/rotate"],
    ["a NUL byte in a line", "/lines/v%001/endpoints"],
  ])("%s", async (_, path) => {
    const p = await newProject();
    const method = path.endsWith("rotate") ? "POST" : "GET";
    const answer = await api(p.ownerToken, method, `/projects/${p.slug}${path}`);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: { code: "bad_request" } });
  });

  test("a NUL byte in a query value or in a JSON string is 400, not the database's error", async () => {
    const p = await newProject();
    const base = `/projects/${p.slug}`;
    const query = await api(p.ownerToken, "GET", `${base}/failures?cursor=%00`);
    expect(query.status).toBe(400);
    const member = await api(p.ownerToken, "POST", `${base}/members`, {
      name: "a\u0000b",
      role: "editor",
    });
    expect(member.status).toBe(400);
    expect(member.body).toMatchObject({ error: { code: "bad_request" } });
  });

  test("a NUL byte in a Connect call's string is invalid_argument", async () => {
    const p = await newProject();
    const answer = await request(`${stack().controlUrl}/relay.v1.KeyService/RotateKey`, {
      method: "POST",
      headers: { authorization: `Bearer ${p.ownerToken}`, "content-type": "application/json" },
      body: JSON.stringify({ project: p.slug, keyId: "key_\u0000" }),
    });
    expect(answer.statusCode).toBe(400);
    expect(await answer.body.json()).toMatchObject({ code: "invalid_argument" });
  });

  test("a Connect body that is not the method's protobuf is invalid_argument, with or without a token", async () => {
    const p = await newProject();
    // A field 1 of wire type 2 announcing 100 bytes that never come: no protobuf parser takes it.
    const truncated = Buffer.from([0x0a, 0x64, 0x01, 0x02]);
    for (const token of [null, p.ownerToken]) {
      const answer = await request(`${stack().controlUrl}/relay.v1.ProjectService/GetProject`, {
        method: "POST",
        headers: {
          "content-type": "application/proto",
          ...(token && { authorization: `Bearer ${token}` }),
        },
        body: truncated,
      });
      expect(answer.statusCode).toBe(400);
      expect(await answer.body.json()).toMatchObject({ code: "invalid_argument" });
    }
    expect(await controlPlaneAnswers()).toBe(200);
  });

  test("an unparsable request target is 400", async () => {
    const answer = await rawExchange("GET //[ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"code":"bad_request"');
  });
});

/** Writes `bytes` (possibly nothing) and answers all the control plane said before it closed. */
function rawExchange(bytes: string): Promise<string> {
  const { hostname, port } = new URL(stack().controlUrl);
  return new Promise((resolve, reject) => {
    const socket = connectTcp(Number(port), hostname, () => socket.write(bytes));
    let received = "";
    socket.on("data", (chunk) => {
      received += chunk;
    });
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
  });
}

test("a connection that sends nothing, or half a request head, is closed (10 s default)", async () => {
  const [silent, halfHead, preface] = await Promise.all([
    rawExchange(""),
    rawExchange("GET /healthz HTTP/1.1\r\n"),
    rawExchange("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
  ]);
  expect(silent).toBe("");
  expect(halfHead).toMatch(/^HTTP\/1\.1 408 /);
  // The HTTP/2 server's SETTINGS, then the close.
  expect(preface.length).toBeGreaterThan(0);
}, 30_000);

test("metrics without a token are refused to a loopback peer that is a proxy passing a request on", async () => {
  for (const base of [stack().controlUrl, stack().edgeUrl]) {
    const direct = await request(`${base}/metrics`);
    await direct.body.dump();
    expect(direct.statusCode).toBe(200);
    const proxied = await request(`${base}/metrics`, {
      headers: { "x-forwarded-for": "203.0.113.7" },
    });
    expect(proxied.statusCode).toBe(403);
    expect(await proxied.body.json()).toMatchObject({ error: { code: "forbidden" } });
  }
});
