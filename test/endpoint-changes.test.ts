/**
 * A change to one endpoint reaches the edges as that endpoint's (issue 24, item 4): an edge
 * refetches that endpoint alone (EdgeService.GetEndpointState), never the project's whole state,
 * and the project's other endpoints answer from its cache throughout. The control plane's own
 * metrics count the fetches.
 */
import { afterAll, expect, test } from "vitest";
import { edgeCalls } from "./control-metrics.ts";
import { api, eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const sink = await targetServer();
afterAll(() => sink.close());

test("editing, renaming and deleting one endpoint refetches that endpoint alone; the others keep answering", async () => {
  const targets = [{ name: "sink", targetUrl: sink.url }];
  const p = await projectWithEndpoint(targets);
  const endpoints = `${p.base}/lines/v1/endpoints`;
  for (const path of ["other", "edited"]) {
    const created = await api(p.ownerToken, "POST", endpoints, {
      path,
      targets,
      schema: { type: "object" },
    });
    expect(created.status).toBe(201);
  }
  const call = (path: string, body = "{}") => relay(p.slug, `/v1/${path}`, { key: p.key, body });
  const othersAnswer = async () => {
    expect((await call("hook")).status).toBe(202);
    expect((await call("other")).status).toBe(202);
  };
  // The edge caches the project (and its keys) once.
  await eventually(async () => (await call("edited")).status === 202);
  await othersAnswer();
  const projectFetches = await edgeCalls("GetProjectState");
  const endpointFetches = await edgeCalls("GetEndpointState");

  for (const field of ["a", "b", "c"]) {
    const edited = await api(p.ownerToken, "PUT", `${endpoints}/edited`, {
      targets,
      schema: { type: "object", required: [field] },
    });
    expect(edited.status).toBe(200);
    // The new schema is in force: it wants this field, and no other.
    await eventually(
      async () =>
        (await call("edited")).status === 422 &&
        (await call("edited", JSON.stringify({ [field]: 1 }))).status === 202,
    );
    await othersAnswer();
  }
  const renamed = await api(p.ownerToken, "PUT", `${endpoints}/edited`, {
    path: "renamed",
    targets,
  });
  expect(renamed.status).toBe(200);
  await eventually(async () => (await call("edited")).status === 404);
  expect((await call("renamed")).status).toBe(202);
  await othersAnswer();
  expect((await api(p.ownerToken, "DELETE", `${endpoints}/renamed`)).status).toBe(204);
  await eventually(async () => (await call("renamed")).status === 404);
  await othersAnswer();

  expect(await edgeCalls("GetProjectState")).toBe(projectFetches);
  // One fetch per changed endpoint called after its change: three edits, the rename's old and
  // new names, the deletion.
  expect((await edgeCalls("GetEndpointState")) - endpointFetches).toBe(6);
});
