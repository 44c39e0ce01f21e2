/**
 * A tenant's schema and config, and an anonymous caller's request line, Host and body, stay
 * within their bounds on the edge (issue 12: items 2, 3, 7, 8, 17, 23).
 */
import { connect } from "node:net";
import { afterAll, describe, expect, test } from "vitest";
import { api, eventually, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";

const sink = await targetServer();
afterAll(() => sink.close());
const target = { name: "sink", targetUrl: sink.url };

describe("endpoint schemas", () => {
  test("a catastrophic pattern answers 422 at once and every other tenant is served", async () => {
    const slow = await projectWithEndpoint([target], {
      schema: { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } },
    });
    const other = await projectWithEndpoint([target]);
    const [refused, served] = await Promise.all([
      relay(slow.slug, "/v1/hook", { key: slow.key, body: `{"s":"${"a".repeat(30)}!"}` }),
      relay(other.slug, "/v1/hook", { key: other.key, body: "{}" }),
    ]);
    expect(refused.status).toBe(422);
    expect(refused.json().error.details).toEqual([
      { path: "/s", message: 'must match pattern "^(a+)+$"' },
    ]);
    expect(served.status).toBe(202);
  });

  test("a pattern RE2 cannot run is refused when saved: 400 on `schema`", async () => {
    for (const pattern of ["^(a)\\1$", "^(?=a)"]) {
      const project = await projectWithEndpoint([target]);
      const saved = await api(project.ownerToken, "POST", `${project.base}/lines/v1/endpoints`, {
        path: "backref",
        targets: [target],
        schema: { properties: { s: { type: "string", pattern } } },
      });
      expect(saved.status, pattern).toBe(400);
      expect(saved.body).toMatchObject({
        error: { code: "bad_request", details: [{ path: "schema" }] },
      });
    }
  });

  test("a failing 5 MB array gets a small 422", async () => {
    const project = await projectWithEndpoint([target], {
      schema: { type: "array", items: { type: "string" } },
    });
    const body = `[${Array(2_400_000).fill("1").join(",")}]`;
    const answer = await relay(project.slug, "/v1/hook", { key: project.key, body });
    expect(answer.status).toBe(422);
    expect(answer.text.length).toBeLessThan(8 * 1024);
  });

  test("two tenants' schemas with the same $id each apply alone", async () => {
    const $id = "https://example.com/order.json";
    const a = await projectWithEndpoint([target], { schema: { $id, required: ["a"] } });
    const b = await projectWithEndpoint([target], { schema: { $id, required: ["b"] } });
    const call = (p: typeof a, body: string) => relay(p.slug, "/v1/hook", { key: p.key, body });
    expect((await call(a, '{"a":1}')).status).toBe(202);
    expect((await call(b, '{"b":1}')).status).toBe(202);
    expect((await call(a, '{"b":1}')).status).toBe(422);
    expect((await call(b, '{"a":1}')).status).toBe(422);
  });
});

test("a deleted and recreated endpoint is checked by its new config on a warm edge", async () => {
  const project = await projectWithEndpoint([target]);
  const endpoints = `${project.base}/lines/v1/endpoints`;
  const create = (ipAllowlist: string[]) =>
    api(project.ownerToken, "POST", endpoints, { path: "z", targets: [target], ipAllowlist });
  expect((await create([])).status).toBe(201);
  const call = () => relay(project.slug, "/v1/z", { key: project.key, body: "{}" });
  expect((await call()).status).toBe(202);
  expect((await api(project.ownerToken, "DELETE", `${endpoints}/z`)).status).toBe(204);
  expect((await create(["203.0.113.0/24"])).status).toBe(201);
  // Routing reaches the edge through its change stream, a moment after the save.
  const answer = await eventually(async () => {
    const next = await call();
    return next.status !== 202 && next;
  }, 5_000);
  expect(answer.status).toBe(403);
  expect(answer.json().error.code).toBe("ip_not_allowed");
});

/** One raw HTTP/1.1 exchange, for request lines and Host headers no client library sends. */
function raw(head: string): Promise<{ status: number; body: string }> {
  const { edgePort } = stack();
  return new Promise((resolve, reject) => {
    const socket = connect(edgePort, "127.0.0.1");
    let text = "";
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("end", () => {
      const [headers = "", body = ""] = text.split("\r\n\r\n");
      const chunked = /^transfer-encoding: *chunked/im.test(headers);
      resolve({ status: Number(headers.split(" ")[1]), body: chunked ? unchunk(body) : body });
    });
    socket.write(`${head}\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}`);
  });
}

function unchunk(body: string): string {
  let out = "";
  for (let at = 0; ; ) {
    const end = body.indexOf("\r\n", at);
    const size = Number.parseInt(body.slice(at, end), 16);
    if (!size) return out;
    out += body.slice(end + 2, end + 2 + size);
    at = end + 2 + size + 2;
  }
}

describe("request targets and Host headers the edge cannot route", () => {
  test("absolute-form and * targets, and hosts that are not project hosts, are 400", async () => {
    const project = await projectWithEndpoint([target]);
    const auth = `authorization: Bearer ${project.key}`;
    const host = `host: ${project.slug}.localhost`;
    const heads = [
      `POST http://${project.slug}.localhost/v1/hook HTTP/1.1\r\n${host}\r\n${auth}`,
      `POST * HTTP/1.1\r\n${host}\r\n${auth}`,
      `POST /v1/hook HTTP/1.1\r\nhost: ${project.slug}.localhost:99999\r\n${auth}`,
      `POST /v1/hook HTTP/1.1\r\nhost: %00.localhost\r\n${auth}`,
      `POST /v1/hook HTTP/1.1\r\nhost: ${project.slug}%2elocalhost\r\n${auth}`,
      `POST /v1/hook HTTP/1.1\r\nhost: [::1]\r\n${auth}`,
      `POST /v1/hook HTTP/1.1\r\nhost: 127.0.0.1:8787\r\n${auth}`,
    ];
    for (const head of heads) {
      const answer = await raw(head);
      expect(answer.status, head).toBe(400);
      expect(JSON.parse(answer.body), head).toEqual({
        error: { code: "bad_request", message: expect.any(String) },
      });
    }
    const trace = await raw(`TRACE /v1/hook HTTP/1.1\r\n${host}`);
    expect(trace.status).toBe(405);
  });

  test("a first label that cannot be a project, or a malformed key, is a wrong key", async () => {
    const project = await projectWithEndpoint([target]);
    const wrong = await relay(project.slug, "/v1/hook", {
      key: `rk_live_${"A".repeat(43)}`,
      body: "{}",
    });
    const answers = [
      await relay("x".repeat(16_000), "/v1/hook", { key: project.key, body: "{}" }),
      await relay("under_score", "/v1/hook", { key: project.key, body: "{}" }),
      await relay(project.slug, "/v1/hook", { key: `rk_live_${"A".repeat(16_000)}`, body: "{}" }),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      expect(answer.text).toBe(wrong.text);
    }
  });
});

/**
 * Like Python's http.client: writes the whole request, and only then reads. The socket does not
 * read meanwhile, so a reset from the edge would discard the answer waiting for it.
 */
function writeAllThenRead(head: string, body: Buffer): Promise<{ status: number; body: string }> {
  const { edgePort } = stack();
  return new Promise((resolve, reject) => {
    const socket = connect(edgePort, "127.0.0.1");
    socket.pause();
    let text = "";
    socket.on("error", (error) => (text ? undefined : reject(error)));
    socket.write(`${head}\r\n\r\n`);
    socket.write(body, () => {
      socket.on("data", (chunk) => {
        text += chunk.toString("latin1");
      });
      socket.on("close", () => {
        const [headers = "", rest = ""] = text.split("\r\n\r\n");
        const chunked = /^transfer-encoding: *chunked/im.test(headers);
        resolve({ status: Number(headers.split(" ")[1]), body: chunked ? unchunk(rest) : rest });
      });
      socket.resume();
    });
  });
}

test.each([
  ["6 MiB, its length declared", 6, true],
  ["6 MiB chunked, so the edge reads up to the cap", 6, false],
  ["32 MiB, its length declared", 32, true],
])(
  "a caller that writes its whole body before reading still reads the 413 (%s)",
  async (_, mib, declared) => {
    const project = await projectWithEndpoint([target]);
    const size = mib * 1024 * 1024;
    const head = [
      "POST /v1/hook HTTP/1.1",
      `host: ${project.slug}.localhost`,
      `authorization: Bearer ${project.key}`,
      "content-type: application/json",
      declared ? `content-length: ${size}` : "transfer-encoding: chunked",
    ].join("\r\n");
    const payload = Buffer.alloc(size, "a");
    const body = declared
      ? payload
      : Buffer.concat([
          Buffer.from(`${size.toString(16)}\r\n`),
          payload,
          Buffer.from("\r\n0\r\n\r\n"),
        ]);
    const answer = await writeAllThenRead(head, body);
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body).error.code).toBe("payload_too_large");
  },
);
