/**
 * JSON Schema for endpoint payloads (draft-07 and formats, through Ajv's compiled validators).
 * The control plane compiles a schema when an endpoint is saved, refusing one that does not
 * compile; the edge compiles it once per endpoint and reuses it for every call.
 *
 * A schema is a tenant's input that runs on the edge beside every other tenant, so its cost is
 * bounded: each schema gets its own Ajv (no `$id` or `$ref` reaches another tenant's), patterns
 * run on RE2 (linear time, no backreferences or lookaround) within a budget per payload,
 * `uniqueItems` is linear, the schema's size and its `$ref` expansion are capped, and a 422
 * carries a bounded list of details.
 */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { RE2JS } from "re2js";
import type { ErrorDetail } from "./errors.ts";
import type { JsonObject, JsonValue } from "./model.ts";

/** A saved schema's JSON text, at most. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/** Objects and arrays nested in a schema, at most. */
const MAX_SCHEMA_DEPTH = 32;
/** Schema nodes with every `$ref` expanded in place, at most (a chain of refs doubles it). */
const MAX_EXPANDED_NODES = 10_000;
/** Per payload: characters tested times each pattern's RE2 program size. */
const PATTERN_BUDGET = 4_000_000;
/** A 422 lists this many details at most, each cut to this many characters. */
export const MAX_DETAILS = 20;
const MAX_DETAIL_CHARS = 200;
/** Beyond this size a failing payload is reported by its first error only. */
const ALL_ERRORS_MAX_BYTES = 64 * 1024;

/** `payloadBytes`: the body's size, when known; a large one is reported by its first error. */
export type PayloadValidator = (payload: unknown, payloadBytes?: number) => ErrorDetail[];

type RegExpEngine = NonNullable<NonNullable<Options["code"]>["regExp"]>;
type KeywordValidate = ((unique: boolean, items: JsonValue[]) => boolean) & {
  errors?: Partial<ErrorObject>[];
};

class PatternBudgetSpent extends Error {}

/** Spent by every pattern test of one validation, reset before each (validation is synchronous). */
const budget = {
  left: PATTERN_BUDGET,
  spend(units: number): void {
    this.left -= units;
    if (this.left < 0) throw new PatternBudgetSpent();
  },
};

function linearRegExp(): RegExpEngine {
  // Ajv asks for "u"; RE2 matches by code point anyway, and JSON Schema patterns carry no flags.
  const engine = (pattern: string) => {
    const re = RE2JS.compile(RE2JS.translateRegExp(pattern));
    const size = re.programSize();
    return {
      test: (text: string) => {
        budget.spend(text.length * size);
        return re.test(text);
      },
      // Ajv keeps one compiled pattern per distinct `toString()`, as for a RegExp.
      toString: () => `/${pattern}/`,
    };
  };
  return Object.assign(engine, { code: "re2js" });
}

function newAjv(allErrors: boolean): Ajv {
  const ajv = new Ajv({
    allErrors,
    // Not strict: customers' schemas carry annotations (examples, titles) Ajv does not know.
    strict: false,
    // Checked against the meta-schema by metaAjv, once.
    validateSchema: false,
    code: { regExp: linearRegExp() },
  });
  addFormats.default(ajv);
  // Ajv's own compares every pair of object items: quadratic in a 5 MiB array.
  ajv.removeKeyword("uniqueItems");
  ajv.addKeyword({
    keyword: "uniqueItems",
    type: "array",
    schemaType: "boolean",
    validate: uniqueItems,
  });
  return ajv;
}

/** In one pass, by each item's canonical JSON. */
const uniqueItems: KeywordValidate = (unique, items) => {
  if (!unique) return true;
  const seen = new Map<string, number>();
  for (const [i, item] of items.entries()) {
    const text = canonical(item);
    const j = seen.get(text);
    if (j !== undefined) {
      uniqueItems.errors = [duplicateError(j, i)];
      return false;
    }
    seen.set(text, i);
  }
  return true;
};

function duplicateError(j: number, i: number): Partial<ErrorObject> {
  return {
    keyword: "uniqueItems",
    message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)`,
    params: { i, j },
  };
}

/** JSON text with object keys sorted: equal JSON values, equal text. */
function canonical(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k] as JsonValue)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * The draft-07 meta-schema, compiled once: compiling it is most of what a fresh Ajv's first
 * schema costs, and each schema gets a fresh Ajv (which keeps every pattern it compiled).
 */
const metaAjv = new Ajv({ strict: false });

/**
 * Compiled alone, in an Ajv of its own. Its root `$id` is dropped: with only local `$ref`s
 * allowed it changes no meaning, and so it cannot clash with a name the instance knows.
 */
function compileAlone(schema: JsonObject, allErrors: boolean): ValidateFunction {
  const { $id: _, ...own } = schema;
  return newAjv(allErrors).compile(own);
}

/**
 * Throws with the reason when the schema is refused: invalid, too large, with a pattern RE2
 * cannot run, or with `$ref`s that expand too far.
 */
export function compileSchema(schema: JsonObject): PayloadValidator {
  const problem = shapeProblem(schema);
  if (problem) throw new Error(problem);
  if (!metaAjv.validateSchema(schema)) {
    throw new Error(metaAjv.errorsText(metaAjv.errors, { dataVar: "schema" }));
  }
  const firstError = compileAlone(schema, false);
  // Every error of a small payload, compiled on its first failure; a large one gets the first.
  let allErrors: ValidateFunction | undefined;
  const run = (validate: ValidateFunction, payload: unknown): ErrorObject[] | "too_costly" => {
    budget.left = PATTERN_BUDGET;
    try {
      return validate(payload) ? [] : (validate.errors ?? []);
    } catch (error) {
      if (error instanceof PatternBudgetSpent) return "too_costly";
      throw error;
    }
  };
  return (payload, payloadBytes = Number.POSITIVE_INFINITY) => {
    let errors = run(firstError, payload);
    if (errors !== "too_costly" && errors.length > 0 && payloadBytes <= ALL_ERRORS_MAX_BYTES) {
      allErrors ??= compileAlone(schema, true);
      errors = run(allErrors, payload);
    }
    if (errors === "too_costly") {
      return [{ path: "/", message: "is too costly to check against the schema's patterns" }];
    }
    return errors.slice(0, MAX_DETAILS).map((e) => ({
      path: cut(e.instancePath || "/"),
      message: cut(e.message ?? "is invalid"),
    }));
  };
}

function cut(text: string): string {
  return text.length > MAX_DETAIL_CHARS ? `${text.slice(0, MAX_DETAIL_CHARS - 1)}…` : text;
}

/** Null when the schema compiles; else why not. */
export function schemaProblem(schema: JsonObject): string | null {
  try {
    compileSchema(schema);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** A schema's size as its bounds count it: the bytes of its JSON (UTF-8). */
export function schemaBytes(schema: JsonObject): number {
  return new TextEncoder().encode(JSON.stringify(schema)).byteLength;
}

/** The bounds Ajv does not check: size, depth, and how far `$ref`s expand. */
function shapeProblem(schema: JsonObject): string | null {
  if (schemaBytes(schema) > MAX_SCHEMA_BYTES) {
    return `a schema is at most ${MAX_SCHEMA_BYTES} bytes of JSON`;
  }
  if (depth(schema) > MAX_SCHEMA_DEPTH) {
    return `a schema nests objects and arrays at most ${MAX_SCHEMA_DEPTH} deep`;
  }
  return refProblem(schema);
}

function depth(value: JsonValue): number {
  if (value === null || typeof value !== "object") return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depth));
}

/**
 * `$ref`s must be local pointers (`#` or `#/...`), not recursive, and the schema with each one
 * expanded in place stays under MAX_EXPANDED_NODES: validation then costs at most that many
 * checks per payload value, where a chain of refs to refs would otherwise double at each link.
 */
function refProblem(schema: JsonObject): string | null {
  const sizes = new Map<JsonValue, number>();
  const open = new Set<JsonValue>();
  const expanded = (node: JsonValue): number | string => {
    if (node === null || typeof node !== "object") return 1;
    const known = sizes.get(node);
    if (known !== undefined) return known;
    if (open.has(node)) return "a recursive $ref is not supported";
    open.add(node);
    let size = 1;
    const ref = !Array.isArray(node) ? node.$ref : undefined;
    if (typeof ref === "string") {
      const target = resolvePointer(schema, ref);
      if (target === undefined) return `$ref '${cut(ref)}' must point inside the schema (#/...)`;
      const inner = expanded(target);
      if (typeof inner === "string") return inner;
      size += inner;
    }
    for (const [key, child] of Object.entries(node)) {
      if (key === "$ref") continue;
      // A nested $id would re-root the pointers below it, where this walk does not follow.
      if (key === "$id" && node !== schema && typeof child === "string") {
        return "$id is allowed only at the schema's root";
      }
      const inner = expanded(child);
      if (typeof inner === "string") return inner;
      size += inner;
      if (size > MAX_EXPANDED_NODES) break;
    }
    open.delete(node);
    if (size > MAX_EXPANDED_NODES) {
      return `the schema with its $refs expanded is over ${MAX_EXPANDED_NODES} nodes`;
    }
    sizes.set(node, size);
    return size;
  };
  const result = expanded(schema);
  return typeof result === "string" ? result : null;
}

/** A local JSON pointer's target (RFC 6901, in a URI fragment); undefined for anything else. */
function resolvePointer(root: JsonObject, ref: string): JsonValue | undefined {
  if (ref !== "#" && !ref.startsWith("#/")) return undefined;
  let node: JsonValue | undefined = root;
  for (const raw of ref
    .slice(2)
    .split("/")
    .filter((_, i) => ref !== "#" || i > 0)) {
    let token: string;
    try {
      token = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    } catch {
      return undefined;
    }
    if (node === null || typeof node !== "object" || !Object.hasOwn(node, token)) return undefined;
    node = (node as Record<string, JsonValue>)[token];
  }
  return node;
}
