/**
 * A write a member can use at once: once the API answers a create or an edit of a line, an
 * endpoint or a key, every edge with a live lease has taken it, so the member's next call sees
 * what the API just answered (docs/api.md "Changes reach the edges").
 */
import { expect, test } from "vitest";
import { api, mintKey, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const sink = await targetServer();

test("endpoints, lines and edits answer the very next call", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  // The edge caches the project once.
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(202);
  const target = { name: "sink", targetUrl: sink.url };
  const statuses: number[] = [];
  for (let i = 0; i < 15; i++) {
    const created = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints`, {
      path: `e${i}`,
      targets: [target],
    });
    expect(created.status).toBe(201);
    statuses.push((await relay(p.slug, `/v1/e${i}`, { key: p.key, body: "{}" })).status);
  }
  expect(statuses).toEqual(Array(15).fill(202));

  expect((await api(p.ownerToken, "POST", `${p.base}/lines`, { key: "v2" })).status).toBe(201);
  const inNewLine = await api(p.ownerToken, "POST", `${p.base}/lines/v2/endpoints`, {
    path: "hook",
    targets: [target],
  });
  expect(inNewLine.status).toBe(201);
  expect((await relay(p.slug, "/v2/hook", { key: p.key, body: "{}" })).status).toBe(202);

  const edited = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/e0`, {
    targets: [target],
    schema: { type: "object", required: ["id"] },
  });
  expect(edited.status).toBe(200);
  expect((await relay(p.slug, "/v1/e0", { key: p.key, body: "{}" })).status).toBe(422);
});

test("a key minted is accepted by the very next call", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(202);
  for (let i = 0; i < 5; i++) {
    const key = await mintKey(p, "live");
    expect((await relay(p.slug, "/v1/hook", { key, body: "{}" })).status).toBe(202);
  }
});
