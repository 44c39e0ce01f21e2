import { expect, test } from "vitest";
import { RelayError } from "../core/errors.ts";
import { untraced } from "../core/tracing.ts";
import { type Envelope, Pipeline, type With } from "./pipeline.ts";

const call = (): Envelope => ({
  request: new Request("http://acme.relay.test/v1/hook", { method: "POST" }),
  conn: { remoteAddress: "192.0.2.1" },
  responseHeaders: new Headers(),
  trace: untraced,
});

test("steps run in order, each handed what the ones before added; a throw is answered where it happened", async () => {
  const ran: string[] = [];
  const pipeline = Pipeline.start<Envelope>((error, envelope) => {
    ran.push(`answered ${RelayError.from(error).code}`);
    return new Response(null, {
      status: RelayError.from(error).status,
      headers: envelope.responseHeaders,
    });
  })
    .use(async (envelope, next) => {
      ran.push("outer");
      const response = await next(envelope);
      // The step around a refusal sees its answer, not the throw.
      ran.push(`outer saw ${response.status}`);
      response.headers.set("x-after", "1");
      return response;
    })
    .use<With<"project">>(async (envelope, next) =>
      next(Object.assign(envelope, { project: "acme" })),
    )
    .use(async (envelope) => {
      ran.push(`last for ${envelope.project}`);
      throw new RelayError("not_found", "no such line or endpoint");
    });
  const response = await pipeline.handle(call());
  expect(response.status).toBe(404);
  expect(response.headers.get("x-after")).toBe("1");
  expect(ran).toEqual(["outer", "last for acme", "answered not_found", "outer saw 404"]);
});

test("a last step that passes the call on is answered as Relay's own failure", async () => {
  const errors: unknown[] = [];
  const pipeline = Pipeline.start<Envelope>((error) => {
    errors.push(error);
    return new Response(null, { status: RelayError.from(error).status });
  }).use(async (envelope, next) => next(envelope));
  expect((await pipeline.handle(call())).status).toBe(500);
  expect(String(errors[0])).toMatch(/last step passed the call on/);
});
