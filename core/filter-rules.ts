/**
 * What a member may save as a target's filter (./filter.ts): a JSON object that reads the call's
 * `body` and `headers` with known operators on operands of their kind, bounded in size, depth and
 * values, so that matching it on every call stays cheap. Checked when an endpoint is saved.
 */
import { isObject, isPrimitive, operators } from "./filter.ts";
import type { JsonObject, JsonValue } from "./model.ts";

/** Bounds on a saved filter. */
export const FILTER_LIMITS = { maxBytes: 16_384, maxDepth: 16, maxNodes: 512 } as const;

/** At most this many conditions in one `$or` or `$and`. */
const MAX_BRANCHES = 64;

type Problem = { path: string; message: string };

const utf8Encoder = new TextEncoder();

/**
 * Problems with a filter a member saves, as `{path, message}` (path like
 * "filter.body.amount.$gt"), [] when fine. Bounded first, so that the rest walks a small tree;
 * a node refused is not looked into.
 */
export function filterProblems(filter: unknown, path = "filter"): Problem[] {
  if (!isObject(filter)) return [{ path, message: "a filter is a JSON object" }];
  const bound = boundProblem(filter, path);
  if (bound) return [bound];
  const checker = new FilterChecker();
  checker.filter(filter, path);
  return checker.problems;
}

/** Depth and node count in one walk that stops at either bound, then the JSON's size. */
function boundProblem(filter: JsonObject, path: string): Problem | null {
  const { maxBytes, maxDepth, maxNodes } = FILTER_LIMITS;
  let nodes = 0;
  const walk = (value: unknown, at: string, depth: number): Problem | null => {
    if (++nodes > maxNodes) return { path, message: `a filter holds at most ${maxNodes} values` };
    if (!isJsonValue(value)) return { path: at, message: "is not a JSON value" };
    if (isPrimitive(value)) return null;
    if (depth > maxDepth) return { path: at, message: `a filter nests at most ${maxDepth} deep` };
    for (const [key, child] of Object.entries(value)) {
      const problem = walk(child, `${at}.${key}`, depth + 1);
      if (problem) return problem;
    }
    return null;
  };
  const problem = walk(filter, path, 1);
  if (problem || utf8Encoder.encode(JSON.stringify(filter)).byteLength <= maxBytes) return problem;
  return { path, message: `a filter is at most ${maxBytes} bytes of JSON` };
}

function isJsonValue(value: unknown): value is JsonValue {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value !== "object" || Array.isArray(value)) return Array.isArray(value);
  return [Object.prototype, null].includes(Object.getPrototypeOf(value));
}

type OperandTest = (operand: JsonValue) => boolean;
const isTextOrTexts: OperandTest = (operand) =>
  typeof operand === "string" ||
  (Array.isArray(operand) && operand.length > 0 && operand.every((s) => typeof s === "string"));
const isListOrText: OperandTest = (operand) =>
  Array.isArray(operand) || typeof operand === "string";
const isOrderable: OperandTest = (operand) => ["number", "string"].includes(typeof operand);

/** What each value operator takes but $eq and $neq (any value, taken as it is). */
const operandRules: Record<string, [takes: OperandTest, message: string]> = {
  $exist: [(operand) => typeof operand === "boolean", "takes true or false"],
  $startsWith: [isTextOrTexts, "takes a string or a non-empty array of strings"],
  $endsWith: [isTextOrTexts, "takes a string or a non-empty array of strings"],
  $in: [isListOrText, "takes an array (of values) or a string (to find in a string)"],
  $nin: [isListOrText, "takes an array (of values) or a string (to find in a string)"],
  $gt: [isOrderable, "takes a number or a string"],
  $gte: [isOrderable, "takes a number or a string"],
  $lt: [isOrderable, "takes a number or a string"],
  $lte: [isOrderable, "takes a number or a string"],
};

class FilterChecker {
  readonly problems: Problem[] = [];

  /** A filter's own level reads the call: its `body`, its `headers`, and logic over filters. */
  filter(filter: JsonObject, path: string): void {
    for (const [key, operand] of Object.entries(filter)) {
      const at = `${path}.${key}`;
      if (key === "body" || key === "headers") {
        this.condition(operand, at, key === "headers" ? "headers" : "value");
      } else if (key === "$or" || key === "$and") {
        for (const [i, branch] of this.branches(key, operand, at).entries()) {
          if (isObject(branch)) this.filter(branch, `${at}.${i}`);
          else this.refuse(`${at}.${i}`, `each of ${key}'s filters is an object`);
        }
      } else if (key === "$not") {
        if (isObject(operand)) this.filter(operand, at);
        else this.refuse(at, "$not here takes a filter, an object");
      } else if (operators.has(key)) {
        this.refuse(at, `${key} tests a value: put it under \`body\` or \`headers\``);
      } else {
        this.refuse(at, "a filter reads `body` and `headers`, combined with $or, $and, $not");
      }
    }
  }

  /**
   * A condition on a value. Under `headers` its field names are header names, which the call
   * carries lowercased: one written otherwise could never match.
   */
  condition(condition: JsonValue, path: string, scope: "headers" | "value"): void {
    if (Array.isArray(condition)) {
      for (const [i, item] of condition.entries()) this.condition(item, `${path}.${i}`, "value");
    }
    if (!isObject(condition)) return;
    for (const [key, operand] of Object.entries(condition)) {
      const at = `${path}.${key}`;
      if (!key.startsWith("$")) {
        const lower = key.toLowerCase();
        if (scope === "value" || key === lower) this.condition(operand, at, "value");
        else this.refuse(at, `headers are matched by their lowercased names: write "${lower}"`);
      } else if (!operators.has(key)) {
        this.refuse(at, `${key} is not a filter operator (they are ${[...operators].join(", ")})`);
      } else if (key === "$or" || key === "$and") {
        for (const [i, branch] of this.branches(key, operand, at).entries()) {
          this.condition(branch, `${at}.${i}`, scope);
        }
      } else if (key === "$not") {
        if (!Array.isArray(operand)) this.condition(operand, at, scope);
        else this.refuse(at, "$not takes a condition: an object or a value");
      } else {
        const [takes, message] = operandRules[key] ?? [() => true, ""];
        if (!takes(operand)) this.refuse(at, `${key} ${message}`);
      }
    }
  }

  /** The conditions of a `$or` or `$and`, or none when its operand is refused. */
  private branches(op: string, operand: JsonValue, path: string): JsonValue[] {
    if (Array.isArray(operand) && operand.length > 0 && operand.length <= MAX_BRANCHES) {
      return operand;
    }
    this.refuse(path, `${op} takes a non-empty array of at most ${MAX_BRANCHES} conditions`);
    return [];
  }

  private refuse(path: string, message: string): void {
    this.problems.push({ path, message });
  }
}
