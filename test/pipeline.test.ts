/** The inbound pipeline, step by step in the spec's order, and what bad input gets. */
import { connect } from "node:net";
import { afterAll, describe, expect, test } from "vitest";
import { projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";

const sink = await targetServer();
afterAll(() => sink.close());
const target = { name: "sink", targetUrl: sink.url };
const orderSchema = {
  type: "object",
  required: ["orderId"],
  properties: { orderId: { type: "integer" }, email: { type: "string", format: "email" } },
};

describe("each step refuses with its own status", () => {
  test("403 ip_not_allowed outside the allowlist; X-Forwarded-For from an untrusted peer is ignored", async () => {
    const closed = await projectWithEndpoint([target], {
      ipAllowlist: ["10.0.0.0/8", "2001:db8::/32"],
    });
    const refused = await relay(closed.slug, "/v1/hook", {
      key: closed.key,
      body: "{}",
      headers: { "x-forwarded-for": "10.1.2.3" },
    });
    expect(refused.status).toBe(403);
    expect(refused.json().error.code).toBe("ip_not_allowed");
    const open = await projectWithEndpoint([target], { ipAllowlist: ["127.0.0.0/8"] });
    expect((await relay(open.slug, "/v1/hook", { key: open.key, body: "{}" })).status).toBe(202);
  });

  test("415 for a non-JSON or malformed body, 422 with details for a schema miss", async () => {
    const p = await projectWithEndpoint([target], { schema: orderSchema });
    const text = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: "orderId=1",
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
    expect(text.json().error.code).toBe("unsupported_media_type");
    const malformed = await relay(p.slug, "/v1/hook", { key: p.key, body: '{"orderId": 1' });
    expect(malformed.status).toBe(415);
    const invalid = await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"orderId":"x","email":"nope"}',
    });
    expect(invalid.status).toBe(422);
    expect(invalid.json()).toEqual({
      error: {
        code: "validation_failed",
        message: expect.any(String),
        details: expect.arrayContaining([
          { path: "/orderId", message: "must be integer" },
          { path: "/email", message: 'must match format "email"' },
        ]),
      },
    });
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: '{"orderId":7}' })).status).toBe(
      202,
    );
  });

  test("429 past the rate limit, with Retry-After; RateLimit-* on every answer", async () => {
    const p = await projectWithEndpoint([target], {
      rateLimit: { requestsPerSecond: 0.5, burst: 2 },
    });
    const answers = [];
    for (let i = 0; i < 3; i++)
      answers.push(await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" }));
    expect(answers.map((a) => a.status)).toEqual([202, 202, 429]);
    expect(answers.map((a) => a.headers["ratelimit-remaining"])).toEqual(["1", "0", "0"]);
    expect(answers.every((a) => a.headers["ratelimit-limit"] === "2")).toBe(true);
    expect(answers[2]?.headers["retry-after"]).toBe("2");
    expect(answers[2]?.json().error.code).toBe("rate_limited");
  });

  test("the plan's default applies without an endpoint limit (paid: burst 200)", async () => {
    const p = await projectWithEndpoint([target]);
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(answer.headers["ratelimit-limit"]).toBe("200"); // the helper's projects are paid
  });
});

describe("a call breaking two rules gets the earlier one", () => {
  test("outside the allowlist and invalid: 403, not 422", async () => {
    const p = await projectWithEndpoint([target], {
      ipAllowlist: ["10.0.0.0/8"],
      schema: orderSchema,
    });
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(403);
  });

  test("invalid and over the limit: 422, and the refused call takes no token", async () => {
    const p = await projectWithEndpoint([target], {
      schema: orderSchema,
      rateLimit: { requestsPerSecond: 0.1, burst: 1 },
    });
    const invalid = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    expect(invalid.status).toBe(422);
    expect(invalid.headers["ratelimit-remaining"]).toBe("1");
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: '{"orderId":1}' })).status).toBe(
      202,
    );
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(422);
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: '{"orderId":1}' })).status).toBe(
      429,
    );
  });

  test("wrong key on a missing endpoint: 401, not 404", async () => {
    const p = await projectWithEndpoint([target]);
    expect((await relay(p.slug, "/v1/nope", { key: "wrong" })).status).toBe(401);
  });
});

/**
 * Raw bytes to the edge, for what an HTTP client would refuse to send. Written in 64 KiB
 * pieces that stop once the edge answers, so an early refusal is read before the socket resets.
 */
function rawRequest(payload: string, waitMs = 5000): Promise<string> {
  const url = new URL(stack().edgeUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    let answer = "";
    const done = () => resolve(answer);
    socket.on("data", (chunk) => {
      answer += chunk.toString();
    });
    socket.on("close", done);
    socket.on("error", done);
    setTimeout(() => {
      socket.destroy();
      done();
    }, waitMs);
    const bytes = Buffer.from(payload);
    const writeFrom = (offset: number): void => {
      if (offset >= bytes.length || answer || socket.destroyed) return;
      const more = socket.write(bytes.subarray(offset, offset + 65_536));
      if (more) setImmediate(() => writeFrom(offset + 65_536));
      else socket.once("drain", () => writeFrom(offset + 65_536));
    };
    writeFrom(0);
  });
}

describe("bad input gets a clear 4xx and the edge stays up", () => {
  test("`bearer` in lower case is accepted; two Authorization headers are not", async () => {
    const p = await projectWithEndpoint([target]);
    const lower = await relay(p.slug, "/v1/hook", {
      body: "{}",
      headers: { authorization: `bearer ${p.key}` },
    });
    expect(lower.status).toBe(202);
    const host = `${p.slug}.localhost`;
    const twice = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${p.key}\r\nAuthorization: Bearer ${p.key}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    expect(twice).toMatch(/^HTTP\/1\.1 401/);
  });

  test("percent-encoded, `..` and undecodable segments match no endpoint: 404", async () => {
    const p = await projectWithEndpoint([target]);
    for (const path of [
      "/v1/%68ook/x",
      "/v1/..%2fhook",
      "/v1/%2e%2e",
      "/v1/%zz",
      "/x/../v1/hook/..",
    ]) {
      const answer = await relay(p.slug, path, { key: p.key, body: "{}" });
      expect(answer.status, path).toBe(404);
    }
  });

  test("a Host with no project label is an unknown project: 401", async () => {
    const p = await projectWithEndpoint([target]);
    const answer = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${p.key}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
  });

  test("a body that never ends is refused (408) when the read timeout passes", async () => {
    const p = await projectWithEndpoint([target]);
    const answer = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: ${p.slug}.localhost\r\nAuthorization: Bearer ${p.key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  test("a body longer than its Content-Length is refused (400)", async () => {
    const p = await projectWithEndpoint([target]);
    const lying = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: ${p.slug}.localhost\r\nAuthorization: Bearer ${p.key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}garbage that is no request\r\n\r\n`,
    );
    expect(lying).toMatch(/HTTP\/1\.1 400/);
  });

  test("headers past the 16 KiB cap are 431; 10 MB of them are cut off, and the edge stays up", async () => {
    const p = await projectWithEndpoint([target]);
    // Small enough to be read whole, so the edge closes cleanly after its answer.
    const over = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: x.localhost\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(over).toMatch(/^HTTP\/1\.1 431/);
    // 10 MB: the edge answers 431 and closes while bytes are still coming, so the client may
    // see the reset before the answer. Either way nothing was relayed.
    const huge = await rawRequest(
      `POST /v1/hook HTTP/1.1\r\nHost: x.localhost\r\nX-Big: ${"a".repeat(10 * 1024 * 1024)}\r\n\r\n`,
    );
    expect(huge === "" || /^HTTP\/1\.1 431/.test(huge), huge.slice(0, 40)).toBe(true);
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(202);
  });
});
