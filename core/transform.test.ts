import { describe, expect, test } from "vitest";
import {
  outgoingCall,
  sandboxCall,
  TRANSFORM_LIMITS,
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
  const call = { path: "/x", query: {}, headers: {} };
  const outcome = (value: unknown, bodyText: string | null = null) =>
    transformOutcome(JSON.stringify(value), bodyText);

  test("null drops the call; a request of the shape is sent, with the body it set or none", () => {
    expect(outcome(null)).toEqual({ dropped: true });
    expect(outcome(call)).toEqual({ call: { ...call, bodyText: null } });
    expect(outcome(call, '{"a":1}')).toEqual({ call: { ...call, bodyText: '{"a":1}' } });
  });

  test("nothing, or anything but a request, fails with what was wrong", () => {
    expect(transformOutcome(undefined, null)).toEqual({
      error: "it returned nothing (return null to drop the call)",
    });
    for (const [value, message] of [
      [[], /other than a request/],
      [42, /other than a request/],
      [{ ...call, path: "x" }, /path is not a string starting with one \//],
      [{ ...call, path: "//evil.example/x" }, /path is not a string starting with one \//],
      [{ ...call, query: { a: 1 } }, /query is not an object of strings/],
      [{ ...call, headers: { "X-Upper": "a" } }, /not a lowercase header name/],
      [{ ...call, headers: { host: "evil.example" } }, /connection's, not its to set/],
      [{ ...call, headers: { a: "b\r\nc: d" } }, /line break/],
      [{ ...call, headers: { a: "\u{1F600}" } }, /beyond U\+00FF/],
    ] as const) {
      expect(outcome(value)).toEqual({ error: expect.stringMatching(message) });
    }
  });

  test("headers, path and body are bounded", () => {
    const headers = Object.fromEntries(
      Array.from({ length: TRANSFORM_LIMITS.headers + 1 }, (_, i) => [`h${i}`, "v"]),
    );
    expect(outcome({ ...call, headers })).toEqual({ error: "it set more than 64 headers" });
    const path = `/${"p".repeat(TRANSFORM_LIMITS.pathBytes)}`;
    expect(outcome({ ...call, path })).toEqual({ error: "its path is over 2048 bytes" });
    const body = "b".repeat(TRANSFORM_LIMITS.bodyBytes + 1);
    expect(outcome(call, body)).toEqual({ error: "its body is over 5242880 bytes" });
  });
});

describe("the call sent", () => {
  test("stays on the target's origin, with the body set, or the call's own bytes", () => {
    const original = utf8.encode('{"a":1}');
    const sent = { path: "/orders/1", query: { v: "2" }, headers: { "x-a": "b" } };
    const call = outgoingCall(
      "https://example.com:8443/in?old=1",
      { ...sent, bodyText: "text" },
      original,
    );
    expect(call.url).toBe("https://example.com:8443/orders/1?v=2");
    expect(new TextDecoder().decode(call.body)).toBe("text");
    const kept = outgoingCall("https://example.com/in", { ...sent, bodyText: null }, original);
    expect(kept.body).toBe(original);
  });

  test("a sandbox is handed the body as text, not parsed", () => {
    expect(sandboxCall("https://example.com/in?v=1", { A: "b" }, utf8.encode("{}"))).toEqual({
      path: "/in",
      query: { v: "1" },
      headers: { a: "b" },
      bodyText: "{}",
    });
  });
});

test("a saved source is something, and at most 32 KiB", () => {
  expect(transformSizeProblem("(r) => r")).toBeNull();
  expect(transformSizeProblem("  ")).toMatch(/not empty/);
  expect(transformSizeProblem("x".repeat(TRANSFORM_LIMITS.sourceBytes + 1))).toMatch(/at most/);
});
