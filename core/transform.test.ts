import { describe, expect, test } from "vitest";
import {
  TRANSFORM_LIMITS,
  transformedCall,
  transformInput,
  transformOutcome,
  transformSizeProblem,
} from "./transform.ts";

const utf8 = new TextEncoder();

describe("what a transformation is handed", () => {
  test("the target URL's path and query, the headers by lowercase name, the body parsed", () => {
    expect(
      transformInput(
        "https://example.com/in?v=1&v=2&a=b",
        { "Content-Type": "application/json", "x-api-key": "k" },
        utf8.encode('{"id":1}'),
      ),
    ).toEqual({
      method: "POST",
      path: "/in",
      query: { v: "2", a: "b" },
      headers: { "content-type": "application/json", "x-api-key": "k" },
      body: { id: 1 },
    });
  });

  test("a body that is not JSON is handed as its text", () => {
    expect(transformInput("https://example.com/", {}, utf8.encode("a=1&b=2")).body).toBe("a=1&b=2");
  });
});

describe("what it hands back", () => {
  const request = { method: "POST", path: "/x", query: {}, headers: {}, body: { a: 1 } };
  const outcome = (value: unknown) => transformOutcome(JSON.stringify(value));

  test("null drops the call; a request of the shape is sent", () => {
    expect(outcome(null)).toEqual({ dropped: true });
    expect(outcome(request)).toEqual({ request });
  });

  test("nothing, or anything but a request, fails with what was wrong", () => {
    expect(transformOutcome(undefined)).toEqual({
      error: "it returned nothing (return null to drop the call)",
    });
    for (const [value, message] of [
      [[], /other than a request/],
      [{ ...request, path: "x" }, /path is not a string starting with one \//],
      [{ ...request, path: "//evil.example/x" }, /path is not a string starting with one \//],
      [{ ...request, query: { a: 1 } }, /query is not an object of strings/],
      [{ ...request, headers: { "X-Upper": "a" } }, /not a lowercase header name/],
      [{ ...request, headers: { host: "evil.example" } }, /connection's, not its to set/],
      [{ ...request, headers: { a: "b\r\nc: d" } }, /line break/],
      [{ ...request, body: undefined }, /has no body/],
    ] as const) {
      expect(outcome(value)).toEqual({ error: expect.stringMatching(message) });
    }
  });

  test("headers, path and body are bounded", () => {
    const headers = Object.fromEntries(
      Array.from({ length: TRANSFORM_LIMITS.headers + 1 }, (_, i) => [`h${i}`, "v"]),
    );
    expect(outcome({ ...request, headers })).toEqual({ error: "it set more than 64 headers" });
    const path = `/${"p".repeat(TRANSFORM_LIMITS.pathBytes)}`;
    expect(outcome({ ...request, path })).toEqual({ error: "its path is over 2048 bytes" });
    const body = "b".repeat(TRANSFORM_LIMITS.bodyBytes + 1);
    expect(outcome({ ...request, body })).toEqual({ error: "its body is over 5242880 bytes" });
  });
});

describe("the call sent", () => {
  test("stays on the target's origin; a string body goes as its text, anything else as JSON", () => {
    const request = {
      method: "POST" as const,
      path: "/orders/1",
      query: { v: "2" },
      headers: { "x-a": "b" },
      body: "plain text",
    };
    const call = transformedCall("https://example.com:8443/in?old=1", request);
    expect(call.url).toBe("https://example.com:8443/orders/1?v=2");
    expect(new TextDecoder().decode(call.body)).toBe("plain text");
    const json = transformedCall("https://example.com/in", { ...request, body: { a: [1] } });
    expect(new TextDecoder().decode(json.body)).toBe('{"a":[1]}');
  });
});

test("a saved source is something, and at most 32 KiB", () => {
  expect(transformSizeProblem("(r) => r")).toBeNull();
  expect(transformSizeProblem("  ")).toMatch(/not empty/);
  expect(transformSizeProblem("x".repeat(TRANSFORM_LIMITS.sourceBytes + 1))).toMatch(/at most/);
});
