import { expect, test } from "vitest";
import { forwardableHeaders } from "./headers.ts";

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
