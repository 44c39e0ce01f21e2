/** zod at the boundary: bad input becomes a 400 naming each offending field. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { type SavedTargetRules, targetUrlProblem } from "../../core/targets.ts";

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

/** Any JSON value; one instance, so the OpenAPI document names it once (`JsonValue`). */
export const jsonValue = z.json();

/** A JSON object of the caller's own (an endpoint's payload schema), kept as sent. */
export const jsonObject = z.record(z.string(), jsonValue);

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
