/**
 * Trying a transformation (`POST {base_url}/transforms/try`, TransformService.TryTransform) on
 * the real control plane: the call it makes, a drop, a failed run as an answer (a throw, past its
 * time), a source over its size or a malformed call refused with details, another project's
 * member refused as not found, and Connect answering what REST does.
 */
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, test } from "vitest";
import { TransformService } from "../gen/relay/v1/transforms_pb.ts";
import { api, memberClient, newProject } from "./helpers.ts";

const order = {
  path: "/hooks/orders",
  query: { source: "relay" },
  headers: { "content-type": "application/json", "x-shop": "north" },
  body: { id: "order-1", status: "paid", amount: 120 },
};

const WRAPS_THE_BODY = `(request) => ({
  ...request,
  path: request.path + "/v2",
  headers: { ...request.headers, "x-order-id": request.body.id },
  body: { order: request.body, shop: request.headers["x-shop"] },
})`;

const project = await newProject();
const tryIt = (transform: string, request: unknown = order, token = project.ownerToken) =>
  api(token, "POST", `/projects/${project.slug}/transforms/try`, { transform, request });

describe("POST {base_url}/transforms/try", () => {
  test("answers the call a transformation makes, as it would be sent", async () => {
    const tried = await tryIt(WRAPS_THE_BODY);
    expect(tried.status).toBe(200);
    expect(tried.body).toEqual({
      outcome: "request",
      request: {
        path: "/hooks/orders/v2",
        query: { source: "relay" },
        headers: { ...order.headers, "x-order-id": "order-1" },
        body: { order: order.body, shop: "north" },
      },
    });
  });

  test("answers dropped for null, and a failed run's reason: a throw, a run past its time", async () => {
    expect((await tryIt("(r) => null")).body).toEqual({ outcome: "dropped" });

    const threw = await tryIt('(r) => { throw new Error("x") }');
    expect(threw.status).toBe(200);
    expect(threw.body).toEqual({ outcome: "error", error: "it threw Error: x" });

    const looped = await tryIt("(r) => { for (;;) {} }");
    expect(looped.status).toBe(200);
    expect(looped.body).toEqual({ outcome: "error", error: "it ran past 50 ms" });

    // A source that does not compile fails its run the same way.
    const broken = await tryIt("(r) => {");
    expect(broken.body).toMatchObject({ outcome: "error", error: /^it threw SyntaxError/ });
  });

  test("refuses a source over 32 KiB, and a malformed call, with details", async () => {
    const long = `(r) => r /* ${"x".repeat(40 * 1024)} */`;
    const tooLong = await tryIt(long);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({
      error: {
        code: "bad_request",
        details: [{ path: "transform", message: "a transformation is at most 32768 bytes" }],
      },
    });

    const malformed = await tryIt("(r) => r", { path: "hooks", headers: { n: 1 } });
    expect(malformed.status).toBe(400);
    const details = (malformed.body as { error: { details: { path: string }[] } }).error.details;
    expect(details.map((d) => d.path).sort()).toEqual([
      "request.body",
      "request.headers.n",
      "request.path",
    ]);
  });

  test("is another project's member's to call as not found", async () => {
    const other = await newProject();
    const refused = await tryIt("(r) => r", order, other.ownerToken);
    expect(refused.status).toBe(404);
    expect(refused.body).toMatchObject({ error: { code: "not_found" } });
  });
});

describe("TransformService.TryTransform", () => {
  const client = memberClient(TransformService, project.ownerToken);
  const request = { ...order, body: fromJson(ValueSchema, order.body) };

  test("answers what REST answers", async () => {
    const rest = (await tryIt(WRAPS_THE_BODY)).body as { request: typeof order };
    const { outcome } = await client.tryTransform({
      project: project.slug,
      transform: WRAPS_THE_BODY,
      request,
    });
    expect(outcome.case).toBe("request");
    const call = outcome.case === "request" ? outcome.value : undefined;
    expect({
      path: call?.path,
      query: call?.query,
      headers: call?.headers,
      body: call?.body && toJson(ValueSchema, call.body),
    }).toEqual(rest.request);

    const dropped = await client.tryTransform({
      project: project.slug,
      transform: "(r) => null",
      request,
    });
    expect(dropped.outcome).toEqual({ case: "dropped", value: true });
  });

  test("refuses a source over 32 KiB as an invalid argument", async () => {
    const refusal = await client
      .tryTransform({ project: project.slug, transform: "x".repeat(40 * 1024), request })
      .catch((error: unknown) => ConnectError.from(error));
    expect(refusal).toBeInstanceOf(ConnectError);
    expect((refusal as ConnectError).code).toBe(Code.InvalidArgument);
    expect((refusal as ConnectError).rawMessage).toMatch(/at most 32768 bytes/);
  });
});
