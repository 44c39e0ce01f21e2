import { describe, expect, test } from "vitest";
import { api, newProject, projectWithEndpoint, relay } from "./helpers.ts";

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
