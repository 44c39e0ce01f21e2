import { expect, test } from "vitest";
import { project, projectOf } from "./project.ts";
import { arrived, passed, refusal } from "./testing.ts";

test("the project is the first label of a Host under the edge's domain, on any port", async () => {
  expect(projectOf("acme.relay.test", "relay.test")).toBe("acme");
  expect(projectOf("ACME.relay.test:8080", "relay.test")).toBe("acme");
  expect(projectOf("acme.relay.test.", "relay.test")).toBe("acme");

  const next = passed<{ project: string }>();
  const envelope = arrived({ headers: { host: "shop.relay.test" } });
  await project("Relay.Test:8787")(envelope, next);
  expect(next.handed[0]?.project).toBe("shop");
});

test("a Host that is no host or names no project is a 400", async () => {
  for (const host of ["acme.relay.test:99999", "%00.relay.test", "acme/x", ""]) {
    expect(() => projectOf(host, "relay.test"), host).toThrow(
      "the Host header is not a valid host",
    );
  }
  for (const host of ["127.0.0.1", "[::1]:80"]) {
    expect(() => projectOf(host, "relay.test"), host).toThrow("must name a project");
  }
  const bad = arrived({ headers: { host: "1.2.3.4" } });
  expect((await refusal(project("relay.test")(bad, passed()))).code).toBe("bad_request");
});

test("any other host gets the 401 a wrong key gets", async () => {
  for (const host of [
    "acme.elsewhere.test",
    "acme.relay.test.evil.test",
    "acme.x.relay.test",
    "relay.test",
    "acmerelay.test",
  ]) {
    const call = arrived({ headers: { host } });
    const refused = await refusal(project("relay.test:8787")(call, passed()));
    expect(refused.toBody(), host).toEqual({
      error: { code: "invalid_or_missing_key", message: "missing or invalid API key" },
    });
  }
});

test("on a dev stack's localhost, a call to the domain alone names its project first in its path", async () => {
  const next = passed<{ project: string; route?: string }>();
  const at = (url: string, host: string) => ({
    ...arrived(),
    request: new Request(url, { method: "POST", headers: { host } }),
  });
  for (const host of ["localhost:8787", "LOCALHOST", "localhost."]) {
    await project("localhost:8787")(at("http://localhost:8787/Demo/v1/orders", host), next);
  }
  expect(next.handed.map((e) => [e.project, e.route])).toEqual([
    ["demo", "/v1/orders"],
    ["demo", "/v1/orders"],
    ["demo", "/v1/orders"],
  ]);
  // A project's own name still works there, and the domain alone of any other is a wrong key.
  await project("localhost:8787")(arrived({ headers: { host: "demo.localhost:8787" } }), next);
  expect(next.handed.at(-1)?.project).toBe("demo");
  expect(next.handed.at(-1)).not.toHaveProperty("route");
  const elsewhere = at("http://relay.test/demo/v1/orders", "relay.test");
  const refused = await refusal(project("relay.test")(elsewhere, passed()));
  expect(refused.code).toBe("invalid_or_missing_key");
});
