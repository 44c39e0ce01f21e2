/**
 * Deleting a project (docs/api.md "Deleting a project"): its keys stop working on the edge at
 * once, every row it had is gone from Postgres, its Temporal histories are deleted (no codec opens
 * what is not there) and its schedules' Temporal Schedules with them; its slug is not given out
 * again. Only an owner or the admin may delete it; another project's member finds nothing.
 */
import { ScheduleNotFoundError } from "@temporalio/client";
import { afterAll, expect, test } from "vitest";
import { searchAttributes } from "../core/temporal.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  newProject,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 1 });
const temporal = await relayTemporal();
const sink = await targetServer();
afterAll(async () => {
  await sink.close();
  await sql.end();
  await temporal.connection.close();
});

const projectQuery = (slug: string) => `${searchAttributes.project} = "${slug}"`;
const workflowsOf = async (slug: string) =>
  (await temporal.workflow.count(projectQuery(slug))).count;

test("a deleted project is gone: its keys, its rows, its Temporal histories and schedules; its slug stays taken", async () => {
  const p = await projectWithEndpoint([{ name: "a", targetUrl: sink.url }]);
  const [{ id: projectId } = { id: "" }] = await sql<{ id: string }[]>`
    select id from projects where slug = ${p.slug}`;
  const ids: string[] = [];
  for (const body of ['{"n":1}', '{"secret":"kept until deleted"}']) {
    const call = await relay(p.slug, "/v1/hook", { key: p.key, body });
    ids.push(call.json().requestId);
  }
  for (const id of ids) expect((await finishedLog(p, id)).status).toBe("delivered");
  const schedule = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/hook/schedules`, {
    cron: "@daily",
  });
  const scheduleId = schedule.body.scheduleId as string;
  await eventually(async () => (await workflowsOf(p.slug)) > 0);
  // The project's workflows (its calls' batches or their own), each history readable now.
  const workflowIds: string[] = [];
  for await (const w of temporal.workflow.list({ query: projectQuery(p.slug) })) {
    workflowIds.push(w.workflowId);
  }
  for (const id of workflowIds) await temporal.workflow.getHandle(id).fetchHistory();

  // Only an owner or the admin; another project's owner finds no such project.
  const editor = await api(p.ownerToken, "POST", `${p.base}/members`, {
    name: "e",
    role: "editor",
  });
  const editorToken = editor.body.token as string;
  expect((await api(editorToken, "DELETE", p.base)).status).toBe(403);
  const other = await newProject();
  expect((await api(other.ownerToken, "DELETE", p.base)).status).toBe(404);

  expect((await api(p.ownerToken, "DELETE", p.base)).status).toBe(204);

  // The key is a wrong key now, as for a project that never was.
  const refused = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
  expect(refused.status).toBe(401);
  expect(refused.json()).toMatchObject({ error: { code: "invalid_or_missing_key" } });
  expect((await api(stack().adminToken, "GET", p.base)).status).toBe(404);
  for (const table of ["requests", "bodies", "api_keys", "members", "schedules", "credit_ledger"]) {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from ${sql(table)} where project_id = ${projectId}`;
    expect({ table, rows: row?.n }).toEqual({ table, rows: 0 });
  }

  // Temporal keeps nothing of it: no workflow to find, no history to read.
  await eventually(async () => (await workflowsOf(p.slug)) === 0, 60_000);
  for (const id of workflowIds) {
    await expect(temporal.workflow.getHandle(id).fetchHistory()).rejects.toThrow(
      /workflow not found/,
    );
  }
  await expect(temporal.schedule.getHandle(scheduleId).describe()).rejects.toBeInstanceOf(
    ScheduleNotFoundError,
  );

  const again = await api(stack().adminToken, "POST", "/projects", {
    slug: p.slug,
    name: "again",
    plan: "paid",
  });
  expect(again.status).toBe(409);
  expect(again.body).toMatchObject({ error: { code: "conflict" } });
}, 120_000);
