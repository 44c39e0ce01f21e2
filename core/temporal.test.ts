import { expect, test } from "vitest";
import { requestSearchAttributes } from "./temporal.ts";

test("a request's search attributes name its project, line, endpoint and status", () => {
  const request = { project: "acme", line: "v1", endpoint: "orders", requestId: "req_1" };
  expect(requestSearchAttributes(request, "queued")).toEqual({
    RelayProject: "acme",
    RelayLine: "v1",
    RelayEndpoint: "orders",
    RelayStatus: "queued",
  });
  expect(requestSearchAttributes(request, "delivering").RelayStatus).toBe("delivering");
});
