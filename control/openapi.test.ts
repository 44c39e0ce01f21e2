/**
 * The OpenAPI document stays what the routes are: the committed docs/openapi.json is the one
 * the route table makes, a standard linter (Redocly's, as `redocly lint` runs it) finds nothing
 * in it, and it documents every route of the table and nothing the table lacks. Needs no stack;
 * test/openapi.test.ts calls every operation it documents.
 */
import { readFile } from "node:fs/promises";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { expect, test } from "vitest";
import { OPENAPI_FILE, openApiDocument } from "./openapi.ts";
import { routes } from "./rest/routes.ts";

const generated = openApiDocument(routes);

test("docs/openapi.json is the document the route table makes (else run `npm run openapi`)", async () => {
  const committed: unknown = JSON.parse(await readFile(OPENAPI_FILE, "utf8"));
  expect(committed, "docs/openapi.json is stale: run `npm run openapi` and commit it").toEqual(
    JSON.parse(JSON.stringify(generated)),
  );
});

test("Redocly's recommended-strict rules find nothing in the document", async () => {
  const config = await createConfig({
    extends: ["recommended-strict"],
    // Relay is a private package: there is no license to name.
    rules: { "info-license": "off" },
  });
  const problems = await lintFromString({
    source: JSON.stringify(generated),
    absoluteRef: "openapi.json",
    config,
  });
  const found = problems
    .map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)
    // Liveness and readiness refuse nothing: they have no 4xx answer to document.
    .filter((p) => !/^operation-4xx-response at #\/paths\/~1(healthz|readyz)\/get\//.test(p));
  expect(found).toEqual([]);
});

test("the document's control-plane operations are exactly the route table's", () => {
  const documented = Object.entries(generated.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((key) => key !== "servers")
      .map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
  );
  const outsideTheTable = [
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "POST /:line/:endpoint", // the edge's
  ];
  expect(documented.sort()).toEqual([...routes.map((r) => r.name), ...outsideTheTable].sort());
});
