/** zod at the boundary: bad input becomes a 400 naming each offending field. */
import type { z } from "zod";
import { RelayError } from "../../core/errors.ts";

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
