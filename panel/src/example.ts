/**
 * The example request on an endpoint's page: a curl command a member can paste as it is, once
 * the key is filled in, with a body its schema accepts.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

const defaultBody: JsonObject = { hello: "relay" };

const sampleStrings: Record<string, string> = {
  email: "user@example.com",
  uri: "https://example.com/",
  url: "https://example.com/",
  "date-time": "2025-01-01T00:00:00Z",
  date: "2025-01-01",
  time: "00:00:00Z",
  uuid: "00000000-0000-4000-8000-000000000000",
  ipv4: "192.0.2.1",
  ipv6: "2001:db8::1",
  hostname: "example.com",
};

/**
 * A value `schema` accepts, for the common shapes of draft-07: an example, default, const or
 * enum when the schema gives one; else every required property (and at least one) filled in by
 * type, strings by format and length, numbers inside their bounds, arrays to their minItems.
 */
export function sampleFor(schema: JsonValue | undefined): JsonValue {
  if (schema === undefined || schema === null) return defaultBody;
  if (typeof schema !== "object" || Array.isArray(schema)) return {};
  const given = schema.examples;
  if (Array.isArray(given) && given.length > 0) return given[0] ?? null;
  if ("default" in schema) return schema.default ?? null;
  if ("const" in schema) return schema.const ?? null;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0] ?? null;
  for (const combinator of ["allOf", "anyOf", "oneOf"]) {
    const options = schema[combinator];
    if (Array.isArray(options) && options.length > 0) {
      // allOf's parts all hold, so merging their objects keeps each satisfied.
      if (combinator === "allOf") return merge(options.map(sampleFor));
      return sampleFor(options[0]);
    }
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type ?? (schema.properties ? "object" : undefined)) {
    case "object":
      return sampleObject(schema);
    case "array": {
      const count = typeof schema.minItems === "number" ? schema.minItems : 0;
      const item = Array.isArray(schema.items) ? schema.items[0] : schema.items;
      return Array.from({ length: count }, () => sampleFor(item ?? {}));
    }
    case "string":
      return sampleString(schema);
    case "integer":
    case "number":
      return sampleNumber(schema, type === "integer");
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return defaultBody;
  }
}

function sampleObject(schema: JsonObject): JsonObject {
  const properties =
    schema.properties && typeof schema.properties === "object" && !Array.isArray(schema.properties)
      ? schema.properties
      : {};
  const required = Array.isArray(schema.required)
    ? schema.required.filter((r): r is string => typeof r === "string")
    : [];
  const names = required.length > 0 ? required : Object.keys(properties).slice(0, 1);
  return Object.fromEntries(names.map((name) => [name, sampleFor(properties[name] ?? {})]));
}

function sampleString(schema: JsonObject): string {
  const format = typeof schema.format === "string" ? sampleStrings[schema.format] : undefined;
  if (format) return format;
  const min = typeof schema.minLength === "number" ? schema.minLength : 0;
  const max = typeof schema.maxLength === "number" ? schema.maxLength : Number.POSITIVE_INFINITY;
  const text = "example".padEnd(min, "x");
  return text.slice(0, Math.max(min, Math.min(text.length, max)));
}

function sampleNumber(schema: JsonObject, integer: boolean): number {
  const bound = (key: string) => {
    const value = schema[key];
    return typeof value === "number" ? value : undefined;
  };
  const exclusiveMinimum = bound("exclusiveMinimum");
  const lowest = bound("minimum") ?? (exclusiveMinimum === undefined ? 1 : exclusiveMinimum + 1);
  const highest = bound("maximum") ?? bound("exclusiveMaximum");
  const value = highest !== undefined && lowest > highest ? highest : lowest;
  return integer ? Math.ceil(value) : value;
}

function merge(values: JsonValue[]): JsonValue {
  if (values.every((v) => v !== null && typeof v === "object" && !Array.isArray(v))) {
    return Object.assign({}, ...values);
  }
  return values[0] ?? null;
}

/** A shell word in single quotes, which keep everything literal ('\'' closes, escapes, reopens). */
const quote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

/** The placeholder a member replaces with an API key of this project. */
export const keyPlaceholder = "<API_KEY>";

/**
 * The curl command for a call to `url`. A stream endpoint gets `-N`, so curl prints each chunk
 * as it arrives instead of buffering it.
 */
export function curlExample(url: string, body: JsonValue, stream: boolean): string {
  return [
    `curl${stream ? " -N" : ""} -X POST ${quote(url)}`,
    `  -H ${quote(`Authorization: Bearer ${keyPlaceholder}`)}`,
    `  -H ${quote("Content-Type: application/json")}`,
    `  -d ${quote(JSON.stringify(body))}`,
  ].join(" \\\n");
}
