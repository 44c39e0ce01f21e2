import { expect, test } from "vitest";
import { callbacksOf } from "./callbacks.ts";

const production = { allowPrivate: false, relayDomain: "relay.example.com" };
const asked = (headers: Record<string, string>, rules = production) =>
  callbacksOf(new Headers(headers), rules);

test("a call's callbacks are its two headers' URLs, either alone, or none", () => {
  expect(asked({})).toEqual({ callbacks: null });
  expect(asked({ "relay-callback": "https://caller.example/done" })).toEqual({
    callbacks: { delivered: "https://caller.example/done" },
  });
  expect(
    asked({
      "relay-callback": "https://caller.example/done",
      "relay-failure-callback": "https://caller.example/failed",
    }),
  ).toEqual({
    callbacks: {
      delivered: "https://caller.example/done",
      failed: "https://caller.example/failed",
    },
  });
});

test("a callback URL is refused where a target's would be: internal, the relay itself, too long", () => {
  for (const [url, problem] of [
    ["http://10.1.2.3/hook", "Relay-Callback may not point here: 10.1.2.3 is a private address"],
    ["http://[::1]:9000/hook", "Relay-Callback may not point here: ::1 is a loopback address"],
    ["http://localhost:3000/hook", "Relay-Callback points at a loopback address"],
    ["https://acme.relay.example.com/v1/hook", "Relay-Callback points at the relay itself"],
    ["file:///etc/passwd", "Relay-Callback must be an http or https URL"],
    [`https://caller.example/${"x".repeat(2048)}`, "Relay-Callback is longer than 2048 characters"],
  ]) {
    expect(asked({ "relay-callback": url as string })).toEqual({ problem });
  }
  expect(asked({ "relay-failure-callback": "http://169.254.169.254/latest" })).toEqual({
    problem: "Relay-Failure-Callback may not point here: 169.254.169.254 is a link-local address",
  });
  // A dev stack's targets are on loopback; so may its callbacks be.
  expect(
    asked(
      { "relay-callback": "http://127.0.0.1:9000/done" },
      { ...production, allowPrivate: true },
    ),
  ).toEqual({
    callbacks: { delivered: "http://127.0.0.1:9000/done" },
  });
});
