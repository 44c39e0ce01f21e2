import { expect, test } from "vitest";
import {
  forwardableHeaders,
  layeredHeaders,
  loggedHeaders,
  safeResponseHeaders,
} from "./headers.ts";

const MARK = "relay.example.com";

test("credentials, hop-by-hop headers and Relay's own namespace are never forwarded", () => {
  const headers = new Headers({
    authorization: "Bearer rk_live_secret",
    cookie: "a=b",
    host: "demo.localhost",
    connection: "keep-alive, x-hop",
    "x-hop": "1",
    "x-relay-attempt": "9",
    "content-type": "application/json",
    "x-trace": "abc",
  });
  expect(forwardableHeaders(headers, MARK)).toEqual({
    "content-type": "application/json",
    "x-trace": "abc",
    "cdn-loop": MARK,
  });
});

test("a header named as an object's own members (__proto__, constructor) is forwarded as any other", () => {
  const headers = new Headers([
    ["__proto__", "a"],
    ["constructor", "b"],
  ]);
  const forwarded = forwardableHeaders(headers, MARK);
  expect(Object.entries(forwarded)).toEqual([
    ["__proto__", "a"],
    ["constructor", "b"],
    ["cdn-loop", MARK],
  ]);
  expect(Object.getPrototypeOf(forwarded)).toBe(Object.prototype);
});

test("a caller's own signature headers are not forwarded: Relay signs each delivery itself", () => {
  const headers = new Headers({
    "webhook-id": "msg_forged",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,forged",
    "x-trace": "abc",
  });
  expect(forwardableHeaders(headers, MARK)).toEqual({ "x-trace": "abc", "cdn-loop": MARK });
});

test("a delay asked of Relay is done by Relay, not passed on", () => {
  const headers = new Headers({
    "relay-delay": "30s",
    "relay-not-before": "2026-11-24T12:00:00Z",
    "idempotency-key": "order-1",
  });
  expect(forwardableHeaders(headers, MARK)).toEqual({
    "idempotency-key": "order-1",
    "cdn-loop": MARK,
  });
});

test("a target's framing, cookies and Relay-namespaced headers do not reach the caller", () => {
  const answer = new Headers({
    "content-type": "text/event-stream",
    "content-length": "10",
    "content-encoding": "gzip",
    connection: "close",
    "set-cookie": "s=1",
    "x-relay-attempt": "3",
    "x-order": "A-7",
  });
  expect(Object.fromEntries(safeResponseHeaders(answer))).toEqual({
    "content-type": "text/event-stream",
    "x-order": "A-7",
  });
});

test("a target's configured header wins over the caller's whatever the case of either", () => {
  const caller = forwardableHeaders(new Headers({ "X-Api-Key": "caller", "x-trace": "abc" }), MARK);
  const headers = layeredHeaders(caller, { "X-API-KEY": "configured" }, { "x-relay-attempt": "1" });
  expect(Object.fromEntries(headers)).toEqual({
    "x-api-key": "configured",
    "x-trace": "abc",
    "cdn-loop": MARK,
    "x-relay-attempt": "1",
  });
});

test("a delivery carries the caller's CDN-Loop with this Relay's mark appended", () => {
  const caller = new Headers({ "CDN-Loop": "cdn-a; v=1, relay.example.com" });
  expect(forwardableHeaders(caller, MARK)["cdn-loop"]).toBe(
    "cdn-a; v=1, relay.example.com, relay.example.com",
  );
});

test("the log shows a request's headers less those a target marks secret, whatever their case", () => {
  const headers = { "X-Partner-Token": "s3cret", "x-note": "kept" };
  expect(loggedHeaders(headers, ["x-partner-token"])).toEqual({ "x-note": "kept" });
  expect(loggedHeaders(headers)).toEqual(headers);
});
