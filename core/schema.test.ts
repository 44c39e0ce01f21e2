import { expect, test } from "vitest";
import type { JsonObject } from "./model.ts";
import { compileSchema, MAX_DETAILS, MAX_SCHEMA_BYTES, schemaProblem } from "./schema.ts";

const check = (schema: object, payload: unknown) => {
  const json = JSON.stringify(payload);
  return compileSchema(schema as never)(payload, new TextEncoder().encode(json).byteLength);
};

test("patterns run on RE2: a catastrophic pattern is answered, not backtracked", () => {
  const schema = { properties: { s: { type: "string", pattern: "^(a+)+$" } } };
  // A backtracking engine takes minutes on this one; RE2 is linear.
  expect(check(schema, { s: `${"a".repeat(5000)}!` })).toEqual([
    { path: "/s", message: 'must match pattern "^(a+)+$"' },
  ]);
  expect(check(schema, { s: "aaaa" })).toEqual([]);
  // JavaScript's escapes still work.
  expect(check({ pattern: "^\\u00e9\\d{2}$" }, "é42")).toEqual([]);
  // Each pattern keeps its own meaning beside others.
  const two = { properties: { a: { pattern: "^a+$" }, b: { pattern: "^b+$" } } };
  expect(check(two, { a: "aa", b: "bb" })).toEqual([]);
  expect(check(two, { a: "bb", b: "aa" })).toHaveLength(2);
  expect(check({ patternProperties: { "^x-": { type: "string" } } }, { "x-a": 1 })).toEqual([
    { path: "/x-a", message: "must be string" },
  ]);
});

test("patterns RE2 cannot run are refused when saved", () => {
  expect(schemaProblem({ pattern: "(a)\\1" })).toMatch(/invalid escape/);
  expect(schemaProblem({ pattern: "^(?=a)" })).toMatch(/Perl syntax/);
  expect(schemaProblem({ patternProperties: { "(?<!x)y": { type: "string" } } })).not.toBeNull();
  expect(schemaProblem({ pattern: "^[a-z]+$" })).toBeNull();
});

test("pattern work per payload is bounded: past the budget the payload is refused", () => {
  const schema = { type: "array", items: { type: "string", pattern: "^[a-z0-9-]+$" } };
  expect(check(schema, ["a".repeat(1000)])).toEqual([]);
  expect(check(schema, Array(100).fill("a".repeat(100_000)))).toEqual([
    { path: "/", message: "is too costly to check against the schema's patterns" },
  ]);
});

test("each schema compiles alone: the same $id twice, no $ref into another schema", () => {
  const a = { $id: "https://example.com/order", type: "object", required: ["a"] };
  const b = { $id: "https://example.com/order", type: "object", required: ["b"] };
  expect(check(a, { b: 1 })).toEqual([{ path: "/", message: "must have required property 'a'" }]);
  expect(check(b, { a: 1 })).toEqual([{ path: "/", message: "must have required property 'b'" }]);
  expect(schemaProblem({ $ref: "https://example.com/order" })).not.toBeNull();
  // Even the meta-schema's own $id neither clashes nor disturbs the schemas compiled after it.
  expect(
    schemaProblem({ $id: "http://json-schema.org/draft-07/schema#", type: "string" }),
  ).toBeNull();
  expect(check(a, {})).toEqual([{ path: "/", message: "must have required property 'a'" }]);
});

test("a failing 5 MiB array gets a bounded list of short details", () => {
  const schema = { type: "array", items: { type: "string" } };
  const payload = Array(2_500_000).fill(1);
  const details = check(schema, payload);
  expect(details).toEqual([{ path: "/0", message: "must be string" }]);
  const small = check(schema, Array(1000).fill(1));
  expect(small).toHaveLength(MAX_DETAILS);
  const long = check({ enum: ["x".repeat(5000)], pattern: "y{1000}" }, "z");
  expect(long.every((d) => d.message.length <= 200)).toBe(true);
});

test("uniqueItems is linear and compares JSON values", () => {
  const schema = { type: "array", uniqueItems: true };
  const distinct = Array.from({ length: 50_000 }, (_, i) => ({ id: i, tags: [i] }));
  expect(check(schema, distinct)).toEqual([]);
  expect(
    check(schema, [
      { a: 1, b: [2] },
      { b: [2], a: 1 },
    ]),
  ).toEqual([
    { path: "/", message: "must NOT have duplicate items (items ## 0 and 1 are identical)" },
  ]);
  expect(check(schema, [1, "1", [1]])).toEqual([]);
});

test("size, depth and $ref expansion are bounded when saved", () => {
  expect(schemaProblem({ description: "x".repeat(MAX_SCHEMA_BYTES) })).toMatch(/at most/);
  let deep: object = { type: "string" };
  for (let i = 0; i < 40; i++) deep = { items: deep };
  expect(schemaProblem(deep as never)).toMatch(/deep/);
  // Each definition refers to the next twice: 2^30 checks for one value.
  const definitions: Record<string, JsonObject> = { d30: { type: "number" } };
  for (let i = 0; i < 30; i++) {
    definitions[`d${i}`] = {
      allOf: [{ $ref: `#/definitions/d${i + 1}` }, { $ref: `#/definitions/d${i + 1}` }],
    };
  }
  expect(schemaProblem({ definitions, $ref: "#/definitions/d0" })).toMatch(/expanded/);
  expect(schemaProblem({ oneOf: [{ items: { $ref: "#" } }, { type: "number" }] })).toMatch(
    /recursive/,
  );
  const shared = { definitions: { id: { type: "integer" } } };
  const ok = { ...shared, properties: { a: { $ref: "#/definitions/id" } } };
  expect(schemaProblem(ok)).toBeNull();
  expect(check(ok, { a: "x" })).toEqual([{ path: "/a", message: "must be integer" }]);
  expect(schemaProblem({ properties: { a: { $id: "inner", type: "string" } } })).toMatch(/root/);
});
