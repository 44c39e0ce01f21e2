/** zod at the boundary: bad input becomes a 400 naming each offending field. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import type { JsonObject } from "../../core/model.ts";
import {
  MAX_TARGET_URL_LENGTH,
  type SavedTargetRules,
  targetUrlProblem,
} from "../../core/targets.ts";

export function parseInput<T extends z.ZodType>(schema: T, input: unknown): z.infer<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const details = result.error.issues.map((issue) => ({
    path: issue.path.join("."),
    message: issue.message,
  }));
  const first = details[0];
  const message = first ? `${first.path || "body"}: ${first.message}` : "invalid request";
  throw new RelayError("bad_request", message, details);
}

/**
 * Any JSON value; one instance, so the OpenAPI document names it once (`JsonValue`). What reaches
 * it was parsed from JSON, so it is open (`{}`): a recursive schema is one that generators drop
 * (openapi-python-client) or emit as a type that refers to itself (openapi-typescript).
 */
export const jsonValue = z.unknown().describe("Any JSON value");

/** An HTTP header name (RFC 9110's token). */
export const headerName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "must be a header name");

/** A token bucket's rate and size (an endpoint's rate limit, a project's). */
export const rateLimitBody = z.strictObject({
  requestsPerSecond: z.number().positive().max(1_000_000),
  burst: z.number().int().min(1).max(10_000_000),
});

/**
 * A JSON object of the caller's own (an endpoint's payload schema), kept as sent: an open object.
 * Its values came from JSON.parse, so they are JSON values, as its type says.
 */
export const jsonObject = z.record(z.string(), z.unknown()) as unknown as z.ZodType<JsonObject>;

/**
 * C0 and C1 control characters: Postgres cannot store NUL in text, and none belongs in a name or
 * an id. Spelled as ranges, not `\p{Cc}`, because the OpenAPI document carries the pattern to
 * clients whose regex dialects lack Unicode properties (Python's).
 */
const CONTROL = "\\x00-\\x1f\\x7f-\\x9f";

/** A path segment's or query value's rule, as the OpenAPI document states it (control/rest). */
export const NO_CONTROL_CHARACTERS = `^[^${CONTROL}]+$`;

/**
 * A header value Relay sends as configured (a target's, a schedule's): fetch sends a value's
 * characters as bytes and refuses one beyond U+00FF, or a line break, so every delivery of it
 * would fail. Refused when set instead.
 */
export const headerValue = z
  .string()
  .max(8192)
  .regex(
    new RegExp(`^[^${CONTROL}\\u0100-\\uffff]*$`),
    "must be header text: no control characters, none beyond U+00FF (encode other text)",
  );

/**
 * A name people read: at most 200 characters as sent (the check comes before the trim), something
 * besides spaces, no control character; kept trimmed. The pattern's leading spaces and first
 * other character are disjoint classes, so it runs in linear time on any length (its check runs
 * even on a string already over the maximum).
 */
export const displayName = z
  .string()
  .max(200)
  .regex(
    new RegExp(`^[^\\S${CONTROL}]*[^\\s${CONTROL}][^${CONTROL}]*$`),
    "must have a character besides spaces, and no control character",
  )
  .trim();

/**
 * A URL Relay posts to (a target's, the notifications'). The document states it as an http(s)
 * `uri`; what holds a request to it is `allowedUrls`, the deployment's rules (core/targets.ts),
 * which refuse anything else with one issue at the field.
 */
export const postedUrl = z
  .string()
  .max(MAX_TARGET_URL_LENGTH)
  .meta({ format: "uri", pattern: "^[Hh][Tt][Tt][Pp][Ss]?://" });

/**
 * A check that `urlsOf`'s URLs are ones this deployment lets Relay post to (core/targets.ts),
 * each refusal an issue at its field. It depends on the deployment, so it is added to a body's
 * schema where it is parsed, and the schema itself stays what the OpenAPI document shows.
 */
export function allowedUrls<T>(
  rules: SavedTargetRules,
  urlsOf: (value: T) => [path: (string | number)[], url: string][],
) {
  return (value: T, issues: z.RefinementCtx<T>) => {
    for (const [path, url] of urlsOf(value)) {
      const problem = targetUrlProblem(url, rules);
      if (problem) issues.addIssue({ code: "custom", path, message: problem });
    }
  };
}
