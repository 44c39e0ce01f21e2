/**
 * The panel's example request: the sample body it builds is accepted by the endpoint's schema
 * (checked with the edge's own validator), and the curl text is a shell command that sends it.
 */
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import type { JsonObject } from "../core/model.ts";
import { compileSchema } from "../core/schema.ts";
import { curlExample, keyPlaceholder, sampleFor } from "../panel/src/example.ts";

const schemas: Record<string, JsonObject> = {
  "required strings with formats and lengths": {
    type: "object",
    required: ["id", "email", "at", "site"],
    properties: {
      id: { type: "string", minLength: 12, maxLength: 12 },
      email: { type: "string", format: "email" },
      at: { type: "string", format: "date-time" },
      site: { type: "string", format: "uri" },
    },
    additionalProperties: false,
  },
  "numbers inside their bounds": {
    type: "object",
    required: ["count", "ratio", "small"],
    properties: {
      count: { type: "integer", minimum: 3 },
      ratio: { type: "number", exclusiveMinimum: 0, maximum: 1 },
      small: { type: "integer", maximum: -2 },
    },
  },
  "nested objects, arrays, enums and booleans": {
    type: "object",
    required: ["order"],
    properties: {
      order: {
        type: "object",
        required: ["lines", "currency", "paid"],
        properties: {
          lines: {
            type: "array",
            minItems: 2,
            items: { type: "object", required: ["sku"], properties: { sku: { type: "string" } } },
          },
          currency: { enum: ["EUR", "USD"] },
          paid: { type: "boolean" },
        },
      },
    },
  },
  "an example given by the schema": {
    type: "object",
    required: ["kind"],
    properties: { kind: { type: "string", pattern: "^evt_[0-9]+$" } },
    examples: [{ kind: "evt_42" }],
  },
  "allOf parts merged": {
    allOf: [
      { type: "object", required: ["a"], properties: { a: { type: "string" } } },
      { type: "object", required: ["b"], properties: { b: { const: 7 } } },
    ],
  },
};

for (const [name, schema] of Object.entries(schemas)) {
  test(`the sample body satisfies a schema with ${name}`, () => {
    expect(compileSchema(schema)(sampleFor(schema))).toEqual([]);
  });
}

test("without a schema the sample is a small JSON object", () => {
  expect(sampleFor(undefined)).toEqual({ hello: "relay" });
});

test("the curl text runs in a shell and sends the body and headers as shown", async () => {
  const seen: { method?: string; auth?: string; type?: string; body: string }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      seen.push({
        method: req.method,
        auth: req.headers.authorization,
        type: req.headers["content-type"],
        body,
      });
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as { port: number };
    // A quote in the body must survive the shell's single quotes.
    const body = { note: "it's here", n: 1 };
    const curl = curlExample(`http://127.0.0.1:${port}/v1/orders`, body, true);
    expect(curl.startsWith("curl -N -X POST ")).toBe(true);
    const { stdout } = await promisify(execFile)("sh", [
      "-c",
      curl.replace(keyPlaceholder, "rk_test_x"),
    ]);
    expect(stdout).toBe("ok");
    expect(seen).toEqual([
      {
        method: "POST",
        auth: "Bearer rk_test_x",
        type: "application/json",
        body: JSON.stringify(body),
      },
    ]);
  } finally {
    server.close();
  }
});
