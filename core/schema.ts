/**
 * JSON Schema for endpoint payloads (draft-07 and formats, through Ajv's compiled validators).
 * The control plane compiles a schema when an endpoint is saved, refusing one that does not
 * compile; the edge compiles it once per endpoint version and reuses it for every call.
 */
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import type { ErrorDetail } from "./errors.ts";
import type { JsonObject } from "./model.ts";

function newAjv(): Ajv {
  // Not strict: customers' schemas carry annotations (examples, titles) Ajv does not know.
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats.default(ajv);
  return ajv;
}

const ajv = newAjv();

export type PayloadValidator = (payload: unknown) => ErrorDetail[];

/** Throws with Ajv's message when the schema itself is invalid. */
export function compileSchema(schema: JsonObject): PayloadValidator {
  const validate: ValidateFunction = ajv.compile(schema);
  return (payload) =>
    validate(payload)
      ? []
      : (validate.errors ?? []).map((e) => ({
          path: e.instancePath || "/",
          message: e.message ?? "is invalid",
        }));
}

/** Null when the schema compiles; else why not. */
export function schemaProblem(schema: JsonObject): string | null {
  try {
    // A fresh instance, so refused schemas leave nothing behind in the shared one.
    newAjv().compile(schema);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
