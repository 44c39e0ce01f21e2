import { expect, test } from "vitest";
import {
  type NotificationEvent,
  notificationBody,
  notificationRequest,
  notificationTypes,
} from "./notifications.ts";
import { decodeSigningSecret, importSigningKey, newSigningSecret, verify } from "./signing.ts";

const event: NotificationEvent = {
  id: "ntf_1",
  type: "request.failed",
  project: "acme",
  at: "2025-01-02T03:04:05.000Z",
  data: { requestId: "req_1", line: "v1", endpoint: "orders", status: "failed", targets: [] },
};

test("the four event types, in the design's order", () => {
  expect(notificationTypes).toEqual([
    "target.circuit_opened",
    "target.recovered",
    "target.disabled",
    "request.failed",
  ]);
});

test("the body is Standard Webhooks' {type, timestamp, data}, the project in data", () => {
  expect(JSON.parse(notificationBody(event))).toEqual({
    type: "request.failed",
    timestamp: "2025-01-02T03:04:05.000Z",
    data: {
      requestId: "req_1",
      line: "v1",
      endpoint: "orders",
      status: "failed",
      targets: [],
      project: "acme",
    },
  });
});

test("an event's data cannot name another project", () => {
  const body = notificationBody({ ...event, data: { project: "other" } });
  expect(JSON.parse(body).data).toEqual({ project: "acme" });
});

test("the request posts the body as JSON, signed with the event's id at the signing time", async () => {
  const secret = newSigningSecret();
  const key = await importSigningKey(decodeSigningSecret(secret));
  const signedAt = new Date("2025-01-02T03:05:00.500Z");
  const signal = new AbortController().signal;
  const init = await notificationRequest(event, key, signedAt, signal);

  expect(init.method).toBe("POST");
  expect(init.redirect).toBe("manual");
  expect(init.signal).toBe(signal);
  expect(new TextDecoder().decode(init.body)).toBe(notificationBody(event));
  expect(init.headers.get("content-type")).toBe("application/json");
  expect(init.headers.get("webhook-id")).toBe("ntf_1");
  // The time it is sent, not the time it happened: a retry is signed anew.
  expect(init.headers.get("webhook-timestamp")).toBe("1735787100");
  const signature = init.headers.get("webhook-signature") ?? "";
  expect(signature).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

  const headers = { id: "ntf_1", timestamp: "1735787100", signature };
  expect(await verify(secret, headers, init.body, signedAt)).toBe(true);
  expect(await verify(newSigningSecret(), headers, init.body, signedAt)).toBe(false);
  expect(await verify(secret, { ...headers, id: "ntf_2" }, init.body, signedAt)).toBe(false);
});
