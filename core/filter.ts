/**
 * Per-target filters: a target may carry a filter in Hookdeck Outpost's syntax, matched against
 * the call `{ body, headers }`; a target whose filter does not match is skipped.
 *
 * The semantics are those of Outpost's Go port of simple-json-match (internal/simplejsonmatch),
 * reproduced exactly, quirks included, so that a filter written for Outpost means the same here.
 * The quirks a member is most likely to meet: `$not` and `$and` under a field see only object
 * values (against a string or a number they never match); in an object with value operators
 * only those operators count (and a value-level `$or` alone decides, if there is one); a missing
 * field fails every condition but an object with `$exist: false`.
 *
 * Matching recurses as deep as the filter (at most FILTER_LIMITS.maxDepth), never as deep as the
 * body: the one step that follows the body without the filter, into arrays nested in arrays, is
 * a loop. So a hostile 10,000-deep body costs time, not the stack.
 */
import type { JsonObject, JsonValue } from "./model.ts";

/** Input a filter is matched against. */
export interface FilterInput {
  body?: JsonValue;
  headers: Record<string, string>;
}

/** Operators that test a value; any other key of a condition names a field. */
export const valueOperators = new Set(
  "$eq $neq $gt $gte $lt $lte $in $nin $startsWith $endsWith $exist".split(" "),
);
export const operators = new Set([...valueOperators, "$or", "$and", "$not"]);

/**
 * The steps one call's filters may take in all (a value tested, an item looked at). A saved filter
 * is small, but a condition's work grows with the body's arrays: 500 conditions against a million
 * items would hold the edge for seconds, and an endpoint has up to 50 targets. Past this a filter
 * does not match; real filters need hundreds.
 */
export const MATCH_STEPS = 100_000;
let stepsLeft = Number.POSITIVE_INFINITY;
const stepsSpent = new Error("the filter's steps are spent");

/** Steps of the match under way (`matchesFilters` sets the budget; matching is synchronous). */
function step(steps = 1): void {
  stepsLeft -= steps;
  if (stepsLeft < 0) throw stepsSpent;
}

/** True when `input` matches `filter` (an empty filter `{}` matches everything). Never throws. */
export function matchesFilter(filter: JsonObject, input: FilterInput): boolean {
  return matchesFilters([filter], input)[0] ?? false;
}

/** Whether `input` matches each of `filters`, all of them within MATCH_STEPS. Never throws. */
export function matchesFilters(filters: readonly JsonObject[], input: FilterInput): boolean[] {
  const call: JsonObject = { headers: input.headers };
  if (input.body !== undefined) call.body = input.body;
  stepsLeft = MATCH_STEPS;
  try {
    return filters.map((filter) => {
      try {
        return matchesCondition(call, filter);
      } catch {
        // As Outpost recovers a panic: a filter that cannot be evaluated does not match; nor
        // does one whose steps are spent.
        return false;
      }
    });
  } finally {
    stepsLeft = Number.POSITIVE_INFINITY;
  }
}

/** A call's targets split by their filters: those it goes to, and those it skips. */
export function targetsByFilter<T extends { filter?: JsonObject | undefined }>(
  targets: readonly T[],
  body: Uint8Array,
  headers: Headers,
  parsed?: JsonValue,
): { kept: T[]; skipped: T[] } {
  const filtered = targets.filter((t) => t.filter);
  if (filtered.length === 0) return { kept: [...targets], skipped: [] };
  const matches = matchesFilters(
    filtered.map((t) => t.filter as JsonObject),
    filterInput(body, headers, parsed),
  );
  const skipped = filtered.filter((_, i) => !matches[i]);
  return { kept: targets.filter((t) => !skipped.includes(t)), skipped };
}

/**
 * Outpost's `Match(input, schema)`: `value` against `condition` at the root, where `$not`, `$and`
 * and `$or` stand beside field names. matchesFilter is this at the call's root; exported so that
 * Outpost's own test cases, whose roots are any JSON value, run here as they run there.
 */
export function matchesCondition(value: JsonValue, condition: JsonValue): boolean {
  if (isObject(condition)) {
    if (hasUnknownOperator(condition)) return false;
    if (Object.hasOwn(condition, "$not")) {
      const negated = matchesCondition(value, condition.$not as JsonValue);
      if (Object.keys(condition).length === 1) return !negated;
      if (negated) return false;
    }
  }
  if (!isObject(value) || !isObject(condition)) return valueMatches(value, condition);
  for (const [key, sub] of Object.entries(condition)) {
    if (key === "$not") continue;
    // Outpost reads `$or`/`$and` as logic only with an array; otherwise as a field's name.
    if (key === "$or" && Array.isArray(sub)) {
      if (!sub.some((branch) => matchesCondition(value, branch))) return false;
    } else if (key === "$and" && Array.isArray(sub)) {
      if (!sub.every((branch) => matchesCondition(value, branch))) return false;
    } else if (!Object.hasOwn(value, key)) {
      if (!(isObject(sub) && sub.$exist === false)) return false;
    } else if (!valueMatches(value[key] as JsonValue, sub)) {
      return false;
    }
  }
  return true;
}

/** Outpost's `recursivelyMatchValue`, the right way up: a field's value against its condition. */
function valueMatches(value: JsonValue, condition: JsonValue): boolean {
  step();
  if (isPrimitive(condition)) return anyItem(value, (item) => item === condition);
  if (isObject(condition) && hasUnknownOperator(condition)) return false;
  if (Array.isArray(value)) {
    // An array condition: each of its conditions is met by some item.
    if (Array.isArray(condition)) {
      return condition.every((wanted) => value.some((item) => valueMatches(item, wanted)));
    }
    const tests = operatorsOf(condition);
    if (tests.length > 0) return tests.every((test) => applies(test, value));
    return anyItem(value, (item) => valueMatches(item, condition));
  }
  if (!isObject(condition)) return false;
  const branches = condition.$or;
  if (Object.hasOwn(condition, "$or") && Array.isArray(branches)) {
    return branches.some((branch) => matchesCondition(value, branch));
  }
  const tests = operatorsOf(condition);
  if (tests.length > 0) return tests.every((test) => applies(test, value));
  return isObject(value) && matchesCondition(value, condition);
}

/**
 * `test` on `value`, or on any item of it when it is an array, arrays in arrays flattened: the
 * loop that keeps a deep body off the stack (Outpost recurses here with the same condition).
 */
function anyItem(value: JsonValue, test: (item: JsonValue) => boolean): boolean {
  const pending: JsonValue[] = [value];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    step();
    if (Array.isArray(next)) for (const item of next) pending.push(item);
    else if (test(next)) return true;
  }
  return false;
}

function operatorsOf(condition: JsonObject): [string, JsonValue][] {
  return Object.entries(condition).filter(([key]) => valueOperators.has(key));
}

/**
 * Validation refuses these, so only an unchecked filter holds one: its condition fails, where
 * Outpost would read the key as a field's name or ignore it beside operators.
 */
function hasUnknownOperator(condition: JsonObject): boolean {
  for (const key in condition) if (key.startsWith("$") && !operators.has(key)) return true;
  return false;
}

/** Value operators on a present value; a value or operand of a type one does not take fails. */
const valueTests: Record<string, (value: JsonValue, operand: JsonValue) => boolean> = {
  $eq: (value, operand) => jsonEquals(value, operand),
  $neq: (value, operand) => !jsonEquals(value, operand),
  $gt: (value, operand) => order(value, operand) > 0,
  $gte: (value, operand) => order(value, operand) >= 0,
  $lt: (value, operand) => order(value, operand) < 0,
  $lte: (value, operand) => order(value, operand) <= 0,
  $in: (value, operand) => contains(value, operand) === true,
  // Not the negation of $in: a type $in does not take fails here too.
  $nin: (value, operand) => contains(value, operand) === false,
  $startsWith: (value, operand) => affixed(value, operand, "startsWith"),
  $endsWith: (value, operand) => affixed(value, operand, "endsWith"),
  // Reached only for a present value; an absent one is decided where fields are looked up.
  $exist: (_value, operand) => operand === true,
};

function applies([op, operand]: [string, JsonValue], value: JsonValue): boolean {
  return valueTests[op]?.(value, operand) ?? false;
}

/**
 * Primitives by value (numbers numerically); complex values as Go compares their json.Marshal
 * texts: keys in any order, and inside them -0 is not 0 (Go writes "-0").
 */
function jsonEquals(a: JsonValue, b: JsonValue): boolean {
  return isPrimitive(a) && isPrimitive(b) ? a === b : sameJson(a, b);
}

/** Deep equality, arrays compared as objects keyed by index (JSON arrays have no holes). */
function sameJson(a: JsonValue, b: JsonValue): boolean {
  step();
  if (isPrimitive(a) || isPrimitive(b)) return Object.is(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const [x, y] = [a as JsonObject, b as JsonObject];
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  return keys.every(
    (key) => Object.hasOwn(y, key) && sameJson(x[key] as JsonValue, y[key] as JsonValue),
  );
}

/** The sign of `value - operand` for two strings or two numbers; NaN (no order) otherwise. */
function order(value: JsonValue, operand: JsonValue): number {
  if (typeof value === "string" && typeof operand === "string") {
    return codePointOrder(value, operand);
  }
  if (typeof value === "number" && typeof operand === "number") return Math.sign(value - operand);
  return Number.NaN;
}

/**
 * Strings by code point, as Go orders their UTF-8 bytes. JavaScript's `<` orders UTF-16 units,
 * which puts an emoji (a surrogate pair, 0xD800-0xDFFF) before U+E000-U+FFFF.
 */
function codePointOrder(a: string, b: string): number {
  for (let i = 0; i < a.length && i < b.length; i++) {
    const difference = codePointRank(a.charCodeAt(i)) - codePointRank(b.charCodeAt(i));
    if (difference !== 0) return Math.sign(difference);
  }
  return Math.sign(a.length - b.length);
}

/** A UTF-16 unit's rank in code point order: a surrogate (of an astral code point) after all. */
function codePointRank(unit: number): number {
  return unit >= 0xd800 && unit <= 0xdfff ? unit + 0x10000 : unit;
}

/**
 * `$in`: with an array operand, a primitive value is one of its items; with a string, a string
 * value holds it; an array value holds the operand as an item. Undefined for other types.
 */
function contains(value: JsonValue, operand: JsonValue): boolean | undefined {
  if (Array.isArray(operand)) {
    return isPrimitive(value) ? operand.some((item) => item === value) : undefined;
  }
  if (typeof value === "string") {
    if (typeof operand !== "string") return undefined;
    // A search's worst case is the two lengths' product: a long body string against a long needle.
    step(Math.ceil((value.length * operand.length) / 65_536));
    return value.includes(operand);
  }
  if (Array.isArray(value)) {
    return value.some((item) => {
      step();
      return isPrimitive(item) && item === operand;
    });
  }
  return undefined;
}

/** A string value against a string or any of an array of strings (up to a non-string item). */
function affixed(value: JsonValue, operand: JsonValue, end: "startsWith" | "endsWith"): boolean {
  if (typeof value !== "string") return false;
  if (typeof operand === "string") return value[end](operand);
  if (!Array.isArray(operand)) return false;
  for (const affix of operand) {
    if (typeof affix !== "string") return false;
    if (value[end](affix)) return true;
  }
  return false;
}

/** Fatal: a body that is not UTF-8 is not JSON (RFC 8259), rather than JSON with U+FFFD in it. */
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * The filter input of a call: its body parsed when it is JSON (undefined otherwise; `parsed`
 * when a step before parsed it already), its headers lowercased, `authorization` left out (a
 * filter has no business with a credential). Cheap when the body is not JSON: its first byte
 * says so before any decoding.
 */
export function filterInput(
  body: Uint8Array,
  headers: Headers,
  parsed: JsonValue | undefined = parsedJson(body),
): FilterInput {
  const named = Object.fromEntries([...headers].filter(([name]) => name !== "authorization"));
  return parsed === undefined ? { headers: named } : { body: parsed, headers: named };
}

function parsedJson(body: Uint8Array): JsonValue | undefined {
  if (!startsLikeJson(body)) return undefined;
  try {
    return JSON.parse(utf8Decoder.decode(body)) as JsonValue;
  } catch {
    return undefined;
  }
}

/** Whitespace, then the first byte of a JSON value; false for an empty body. */
function startsLikeJson(body: Uint8Array): boolean {
  for (const byte of body) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return jsonStarts.has(byte);
  }
  return false;
}

/** `{ [ " - 0-9 t f n`. */
const jsonStarts = new Set([...'{["-0123456789tfn'].map((c) => c.charCodeAt(0)));

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isPrimitive(value: JsonValue): value is string | number | boolean | null {
  return value === null || typeof value !== "object";
}
