import { connect } from "node:net";
import { describe, expect, test } from "vitest";
import { api, newProject, projectWithEndpoint, relay, stack } from "./helpers.ts";

const unreachable = { name: "t", targetUrl: "http://127.0.0.1:9/in" };

describe("the edge refuses bad calls with docs/design.md's error body", () => {
  test("only POST is relayed: 405 with Allow", async () => {
    const project = await projectWithEndpoint([unreachable]);
    const answer = await relay(project.slug, "/v1/hook", { key: project.key, method: "GET" });
    expect(answer.status).toBe(405);
    expect(answer.headers.allow).toBe("POST");
    expect(answer.json()).toEqual({
      error: { code: "method_not_allowed", message: expect.any(String) },
    });
  });

  test("a missing, malformed, unknown or foreign key and an unknown project answer byte-identical 401s", async () => {
    const project = await projectWithEndpoint([unreachable]);
    const other = await projectWithEndpoint([unreachable]);
    const answers = [
      await relay(project.slug, "/v1/hook", { key: null }),
      await relay(project.slug, "/v1/hook", { key: "not-a-key" }),
      await relay(project.slug, "/v1/hook", { key: `rk_live_${"A".repeat(43)}` }),
      await relay(project.slug, "/v1/hook", { key: other.key }),
      await relay("no-such-project", "/v1/hook", { key: project.key }),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      expect(answer.text).toBe(answers[0]?.text);
      expect(
        Object.keys(answer.headers)
          .filter((h) => h !== "date")
          .sort(),
      ).toEqual(
        Object.keys(answers[0]?.headers ?? {})
          .filter((h) => h !== "date")
          .sort(),
      );
    }
    expect(answers[0]?.json()).toEqual({
      error: { code: "invalid_or_missing_key", message: expect.any(String) },
    });
  });

  test("every 401 keeps the connection alive alike: the same status line and headers, Connection included", async () => {
    const project = await projectWithEndpoint([unreachable]);
    const host = `${project.slug}.localhost`;
    const cases = {
      "no key": [host, null],
      "malformed key": [host, "Bearer not-a-key"],
      "well-formed wrong key": [host, `Bearer rk_live_${"A".repeat(43)}`],
      "unknown project": ["no-such-project.localhost", `Bearer ${project.key}`],
    } as const;
    const heads: Record<string, string> = {};
    for (const [name, [callHost, authorization]] of Object.entries(cases)) {
      heads[name] = await headOfAnswer(callHost, authorization);
    }
    expect(heads["well-formed wrong key"]).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
    expect(heads["well-formed wrong key"]).toMatch(/\r\nconnection: keep-alive\r\n/i);
    for (const [name, head] of Object.entries(heads)) {
      expect(head, name).toBe(heads["well-formed wrong key"]);
    }
  });

  test("an authenticated call to a missing line or endpoint is 404", async () => {
    const project = await projectWithEndpoint([unreachable]);
    for (const path of ["/v2/hook", "/v1/nope", "/v1/hook/extra", "/v1"]) {
      const answer = await relay(project.slug, path, { key: project.key, body: "{}" });
      expect(answer.status, path).toBe(404);
      expect(answer.json().error.code).toBe("not_found");
    }
  });

  test("a body over the size cap is 413 and nothing is queued", async () => {
    const project = await projectWithEndpoint([unreachable]);
    const answer = await relay(project.slug, "/v1/hook", {
      key: project.key,
      body: JSON.stringify({ blob: "x".repeat(5 * 1024 * 1024) }),
    });
    expect(answer.status).toBe(413);
    expect(answer.json().error.code).toBe("payload_too_large");
    const log = await api(project.ownerToken, "GET", `${project.base}/requests`);
    expect(log.body.requests).toEqual([]);
  });

  test("a member token is not an API key", async () => {
    const { slug, ownerToken } = await newProject();
    const answer = await relay(slug, "/v1/hook", { key: ownerToken });
    expect(answer.status).toBe(401);
  });
});

/**
 * The head of the edge's answer to a POST whose body follows its headers a moment later, as a
 * client's second write does (the Date header left out).
 */
function headOfAnswer(host: string, authorization: string | null): Promise<string> {
  const url = new URL(stack().edgeUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let answer = "";
    socket.on("error", reject);
    socket.on("data", (chunk) => {
      answer += chunk.toString();
      const end = answer.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.destroy();
      resolve(answer.slice(0, end + 2).replace(/^date: .*\r\n/im, ""));
    });
    const auth = authorization ? `authorization: ${authorization}\r\n` : "";
    socket.write(
      `POST /v1/hook HTTP/1.1\r\nhost: ${host}\r\n${auth}content-type: application/json\r\ncontent-length: 2\r\n\r\n`,
    );
    setTimeout(() => socket.write("{}"), 100);
  });
}
