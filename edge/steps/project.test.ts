import { expect, test } from "vitest";
import { project, projectOf } from "./project.ts";
import { arrived, passed, refusal } from "./testing.ts";

test("the project is the Host's first label; a Host that is no host or names no project is a 400", async () => {
  expect(projectOf("acme.relay.test")).toBe("acme");
  expect(projectOf("ACME.relay.test:8080")).toBe("acme");
  for (const host of ["acme.relay.test:99999", "%00.relay.test", "acme/x", ""]) {
    expect(() => projectOf(host), host).toThrow("the Host header is not a valid host");
  }
  for (const host of ["127.0.0.1", "[::1]:80"]) {
    expect(() => projectOf(host), host).toThrow("must name a project");
  }

  const next = passed<{ project: string }>();
  const envelope = arrived({ headers: { host: "shop.relay.test" } });
  await project(envelope, next);
  expect(next.handed[0]?.project).toBe("shop");
  const bad = arrived({ headers: { host: "1.2.3.4" } });
  expect((await refusal(project(bad, next))).code).toBe("bad_request");
});
