/**
 * What a new user's first script does with the types openapi-typescript generates from
 * docs/openapi.json and openapi-fetch: create an endpoint, read a request back.
 * test/generated-clients.test.ts copies it beside the generated relay.d.ts, type-checks both
 * (strict, no skipLibCheck) and runs it; it prints one JSON line.
 */
import createClient from "openapi-fetch";
import type { paths } from "./relay.js";

const env = (name: string) => process.env[name] ?? "";
const project = env("RELAY_PROJECT");
const client = createClient<paths>({
  baseUrl: env("RELAY_CONTROL_URL"),
  headers: { authorization: `Bearer ${env("RELAY_TOKEN")}` },
});

const created = await client.POST("/projects/{project}/lines/{line}/endpoints", {
  params: { path: { project, line: "v1" } },
  body: {
    path: "from-typescript",
    targets: [{ name: "receiver", targetUrl: env("RELAY_TARGET_URL") }],
  },
});
if (!created.data) throw new Error(`create: ${JSON.stringify(created.error)}`);

const read = await client.GET("/projects/{project}/requests/{requestId}", {
  params: { path: { project, requestId: env("RELAY_REQUEST_ID") } },
});
if (!read.data) throw new Error(`read: ${JSON.stringify(read.error)}`);

console.log(
  JSON.stringify({
    endpoint: created.data.path,
    request: read.data.requestId,
    status: read.data.status,
  }),
);
