import { expect, test } from "vitest";
import { untraced } from "../../core/tracing.ts";
import { EndpointRuntime } from "../endpoints.ts";
import type { Routed } from "../pipeline.ts";
import { endpoint } from "./endpoint.ts";
import { endpointIn, hookEndpoint, liveKey, passed, projectState, refusal } from "./testing.ts";

const spaced = hookEndpoint({ path: "a b", ipAllowlist: ["10.0.0.0/8"] });
const step = endpoint(
  {
    now: () => new Date(),
    key: async () => null,
    endpoint: async (project: string, line: string, path: string) =>
      endpointIn(project === "acme" ? projectState(spaced) : null)(project, line, path),
  },
  new EndpointRuntime(),
);

const call = (path: string, project = "acme") => ({
  request: new Request(`http://acme.relay.test${path}`, { method: "POST" }),
  conn: { remoteAddress: "192.0.2.1" },
  responseHeaders: new Headers(),
  trace: untraced,
  project,
  key: liveKey,
});

test("the path's two decoded segments name the endpoint, handed on with its compiled rules", async () => {
  const next = passed<Routed>();
  await step(call("/v1/a%20b"), next);
  const [routed] = next.handed;
  expect(routed?.endpoint).toBe(spaced);
  expect([...(routed?.projectState.endpoints.values() ?? [])]).toEqual([spaced]);
  expect(routed?.compiled.allowlist).toHaveLength(1);
});

test("another path, a third segment, a bad escape or an unknown project is a 404", async () => {
  for (const [path, project] of [
    ["/v1/other"],
    ["/v1/a%20b/more"],
    ["/v1/%E0%A4%A"],
    ["/v1/a%20b", "gone"],
  ]) {
    const refused = await refusal(step(call(path as string, project), passed()));
    expect(refused.code, path).toBe("not_found");
  }
});
