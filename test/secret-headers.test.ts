/**
 * A header a target marks secret (issue 28) is forwarded to every target but never kept in the
 * request log; Authorization is neither forwarded nor kept.
 */
import { afterAll, expect, test } from "vitest";
import { api, eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const target = await targetServer();
afterAll(() => target.close());

test("a header a target marks secret reaches the target and stays out of the log", async () => {
  const project = await projectWithEndpoint([
    { name: "partner", targetUrl: target.url, secretHeaders: ["X-Partner-Token"] },
  ]);
  const sent = await relay(project.slug, "/v1/hook", {
    key: project.key,
    body: "{}",
    headers: { "x-partner-token": "s3cret", "x-trace-note": "kept" },
  });
  expect(sent.status).toBe(202);
  const { requestId } = sent.json() as { requestId: string };
  await eventually(async () => target.received.length > 0);
  expect(target.received[0]?.headers["x-partner-token"]).toBe("s3cret");
  expect(target.received[0]?.headers.authorization).toBeUndefined();

  const logged = await eventually(async () => {
    const read = await api(project.ownerToken, "GET", `${project.base}/requests/${requestId}`);
    return read.body.status === "delivered" ? read.body : null;
  });
  const headers = logged.headers as Record<string, string>;
  expect(headers["x-trace-note"]).toBe("kept");
  expect(Object.keys(headers)).not.toContain("x-partner-token");
  expect(Object.keys(headers)).not.toContain("authorization");
});

test("a secret header stays out of a request read before the worker logs it", async () => {
  const project = await projectWithEndpoint([
    { name: "partner", targetUrl: target.url, secretHeaders: ["X-Partner-Token"] },
  ]);
  const sent = await relay(project.slug, "/v1/hook", {
    key: project.key,
    body: "{}",
    headers: { "x-partner-token": "s3cret", "x-trace-note": "kept", "relay-delay": "1h" },
  });
  expect(sent.status).toBe(202);
  const { requestId } = sent.json() as { requestId: string };
  const read = await api(project.ownerToken, "GET", `${project.base}/requests/${requestId}`);
  expect(read.body.status).toBe("scheduled");
  const headers = read.body.headers as Record<string, string>;
  expect(headers["x-trace-note"]).toBe("kept");
  expect(Object.keys(headers)).not.toContain("x-partner-token");
  await api(project.ownerToken, "DELETE", `${project.base}/requests/${requestId}`);
});
