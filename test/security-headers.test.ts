/**
 * The headers every control-plane answer carries, seen from outside: REST, Connect, gRPC over
 * h2c, ops and the panel are never content-sniffed nor framed, and no API answer (several carry
 * a secret shown once) is kept by a browser's or a proxy's cache.
 */
import { connect as connectHttp2 } from "node:http2";
import { connect as connectTcp } from "node:net";
import { request } from "undici";
import { expect, test } from "vitest";
import { api, newProject, stack } from "./helpers.ts";

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

test("REST answers, refusals and secrets shown once alike, are nosniff, unframed and no-store", async () => {
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

  const minted = await api(ownerToken, "POST", `/projects/${slug}/keys`, {
    name: "k",
    mode: "live",
  });
  expect(minted.status).toBe(201);
  expect(minted.body.plaintext).toMatch(/^rk_live_/);
  expectApiAnswer(minted.headers);

  const member = await api(ownerToken, "POST", `/projects/${slug}/members`, {
    name: "second",
    role: "editor",
  });
  expect(member.status).toBe(201);
  expectApiAnswer(member.headers);
});

test("Connect answers, a key minted and a refusal alike, are nosniff, unframed and no-store", async () => {
  const { slug, ownerToken } = await newProject();
  const minted = await connectCall(ownerToken, "KeyService/MintKey", {
    project: slug,
    name: "k",
    mode: "KEY_MODE_LIVE",
  });
  expect(minted.status).toBe(200);
  expect(JSON.stringify(minted.body)).toContain("rk_live_");
  expectApiAnswer(minted.headers);

  const refused = await connectCall(null, "ProjectService/ListProjects", {});
  expect(refused.status).toBe(401);
  expectApiAnswer(refused.headers);

  const unknown = await connectCall(ownerToken, "ProjectService/NoSuchMethod", {});
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
