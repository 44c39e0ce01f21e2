/**
 * Writes docs/openapi.json from the route table: `npm run openapi`, which then formats it as
 * biome does the rest. control/openapi.test.ts fails while the committed one differs.
 */
import { writeFile } from "node:fs/promises";
import { OPENAPI_FILE, openApiDocument } from "./openapi.ts";
import { routes } from "./rest/routes.ts";

await writeFile(OPENAPI_FILE, `${JSON.stringify(openApiDocument(routes), null, 2)}\n`);
