/**
 * Trying a transformation before it is saved: a member's source run on a call they give (the
 * panel's: a logged request as its target would get it) in the sandbox deliveries use, with the
 * same bounds and in the project's own line for a sandbox thread. Nothing is sent or saved. A run
 * that fails is an answer, as the delivery's failure would be; only a source over its size or a
 * malformed call is refused. Owners and editors.
 */
import { z } from "zod";
import type { JsonValue } from "../../core/model.ts";
import { bodyValue, TRANSFORM_LIMITS, transformSizeProblem } from "../../core/transform.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { jsonValue, parseInput } from "./validation.ts";

const stringsByName = z.record(z.string(), z.string());

/**
 * Required: an unknown's key may otherwise be left out, and an empty body is "". What reaches it
 * was parsed from JSON, so it is a JSON value, as its type says.
 */
const body = jsonValue
  .refine((value) => value !== undefined, 'required (an empty body is "")')
  .describe(
    "The body parsed as JSON; its text when it is not JSON",
  ) as unknown as z.ZodType<JsonValue>;

/** A call as a transformation is handed it and hands it back (core/transform.ts); always a POST. */
export const transformCall = z.strictObject({
  path: z
    .string()
    .max(TRANSFORM_LIMITS.pathBytes)
    .regex(/^\//, "must start with /")
    .describe("The target URL's path, as `/hooks/orders`"),
  query: stringsByName.describe("The target URL's query values by name"),
  headers: stringsByName.describe("Its headers by lowercase name"),
  body,
});

/** The call to try it on: a query or headers left out are none. */
const callToTry = transformCall.extend({
  query: transformCall.shape.query.default({}),
  headers: transformCall.shape.headers.default({}),
});

export const tryTransformBody = z.strictObject({
  transform: z
    .string()
    // Stated in the document too, so a client knows: something besides spaces.
    .regex(/\S/, "a transformation is a function, not empty")
    .superRefine((source, issues) => {
      const problem = source.trim() && transformSizeProblem(source); // an empty one: the pattern
      if (problem) issues.addIssue({ code: "custom", message: problem });
    })
    .describe(
      `The transformation's source: a JavaScript function \`(request) => request\`, at most ${TRANSFORM_LIMITS.sourceBytes} bytes`,
    ),
  request: callToTry.describe("The call it is handed, as the target would get it"),
});

export const triedTransform = z
  .discriminatedUnion("outcome", [
    z
      .strictObject({ outcome: z.literal("request"), request: transformCall })
      .describe("The call the target would be sent"),
    z
      .strictObject({ outcome: z.literal("dropped") })
      .describe("It returned null: the target would skip the call (not sent, not charged)"),
    z
      .strictObject({ outcome: z.literal("error"), error: z.string() })
      .describe("Why the run failed: the delivery would fail the same way, without a retry"),
  ])
  .describe("What the transformation made of the call");

export type TriedTransform = z.output<typeof triedTransform>;

/** Runs `transform` on the call in `input` for project `slug`: the call it makes, none, or why. */
export async function tryTransform(
  ctx: Ctx,
  slug: string,
  input: unknown,
): Promise<TriedTransform> {
  const access = await projectAccess(ctx, slug);
  const { transform, request } = parseInput(tryTransformBody, input);
  const { body, ...call } = request;
  const bodyText = typeof body === "string" ? body : JSON.stringify(body);
  const outcome = await ctx.transforms.run(access.slug, transform, { ...call, bodyText });
  if ("dropped" in outcome) return { outcome: "dropped" };
  if ("error" in outcome) return { outcome: "error", error: outcome.error };
  const { path, query, headers, bodyText: sent } = outcome.call;
  const sentBody = sent === null ? body : bodyValue(sent);
  return { outcome: "request", request: { path, query, headers, body: sentBody } };
}
