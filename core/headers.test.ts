import { expect, test } from "vitest";
import { forwardableHeaders, layeredHeaders, safeResponseHeaders } from "./headers.ts";

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
  expect(forwardableHeaders(headers)).toEqual({
    "content-type": "application/json",
    "x-trace": "abc",
  });
});

test("a caller's own signature headers are not forwarded: Relay signs each delivery itself", () => {
  const headers = new Headers({
    "webhook-id": "msg_forged",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,forged",
    "x-trace": "abc",
  });
  expect(forwardableHeaders(headers)).toEqual({ "x-trace": "abc" });
});

test("a delay asked of Relay is done by Relay, not passed on", () => {
  const headers = new Headers({
    "relay-delay": "30s",
    "relay-not-before": "2026-11-24T12:00:00Z",
    "idempotency-key": "order-1",
  });
  expect(forwardableHeaders(headers)).toEqual({ "idempotency-key": "order-1" });
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
  const caller = forwardableHeaders(new Headers({ "X-Api-Key": "caller", "x-trace": "abc" }));
  const headers = layeredHeaders(caller, { "X-API-KEY": "configured" }, { "x-relay-attempt": "1" });
  expect(Object.fromEntries(headers)).toEqual({
    "x-api-key": "configured",
    "x-trace": "abc",
    "x-relay-attempt": "1",
  });
});
