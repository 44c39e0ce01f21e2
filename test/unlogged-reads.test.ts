/**
 * A read of a request not in the log looks for it in Temporal (up to five visibility queries),
 * so each project has a few such reads at once per control plane, a few more wait their turn,
 * past them 429, and another project's reads go on (docs/api.md, the request log). Another project's request id is
 * answered as an unknown one is: 404, after the same looks.
 */
import { expect, test } from "vitest";
import { api, newProject } from "./helpers.ts";

const read = (p: { slug: string; ownerToken: string }, requestId: string) =>
  api(p.ownerToken, "GET", `/projects/${p.slug}/requests/${requestId}`);

test("one project's reads of unknown ids are bounded at once; another project's go on", async () => {
  const [busy, other] = [await newProject(), await newProject()];
  const unknown = (i: number) => `req_unknown${Date.now().toString(36)}${i}`;
  const [burst, beside] = await Promise.all([
    Promise.all(Array.from({ length: 100 }, (_, i) => read(busy, unknown(i)))),
    read(other, unknown(99)),
  ]);
  const statuses = burst.map((answer) => answer.status);
  // 8 look at once and 64 wait their turn: those are 404, the other 28 429.
  expect(statuses.filter((s) => s === 404).length).toBeGreaterThanOrEqual(72);
  expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(20);
  expect(statuses.every((s) => s === 404 || s === 429)).toBe(true);
  expect(burst.find((a) => a.status === 429)?.body).toMatchObject({
    error: { code: "rate_limited" },
  });
  expect(beside.status).toBe(404);
  expect((await read(busy, unknown(100))).status).toBe(404);
});
