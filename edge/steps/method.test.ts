import { expect, test } from "vitest";
import { method } from "./method.ts";
import { arrived, passed, refusal } from "./testing.ts";

test("only a POST is passed on; anything else is a 405 that names POST in Allow", async () => {
  const get = arrived({ method: "GET" });
  const next = passed();
  expect((await refusal(method(get, next))).code).toBe("method_not_allowed");
  expect(get.responseHeaders.get("allow")).toBe("POST");
  expect(next.handed).toHaveLength(0);

  expect((await method(arrived(), next)).status).toBe(204);
  expect(next.handed).toHaveLength(1);
});
