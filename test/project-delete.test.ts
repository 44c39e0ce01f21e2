/**
 * Deleting a project (docs/api.md "Deleting a project"): its keys stop working on the edge at
 * once, every row it had is gone from Postgres, its Temporal histories are deleted (no codec opens
 * what is not there) and its schedules' Temporal Schedules with them; its slug is not given out
 * again. Only an owner or the admin may delete it; another project's member finds nothing.
 */
import { ScheduleNotFoundError } from "@temporalio/client";
import { afterAll, expect, test } from "vitest";
import { RETENTION_SCHEDULE_ID, searchAttributes } from "../core/temporal.ts";
import { projectKey } from "../platform/temporal.ts";
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

test("a workflow of a deleted project's that escaped its DELETE is deleted by the first daily run an hour later", async () => {
  const p = await projectWithEndpoint([{ name: "a", targetUrl: sink.url }]);
  expect((await api(p.ownerToken, "DELETE", p.base)).status).toBe(204);
  // Started after the deletion's batch, as a running workflow of the project may start one.
  const escaped = await temporal.workflow.start("pruneRequestLog", {
    taskQueue: "nobody-polls-this",
    workflowId: `escaped-${p.slug}`,
    typedSearchAttributes: [{ key: projectKey, value: p.slug }],
  });
  await eventually(async () => (await workflowsOf(p.slug)) === 1, 30_000);
  const swept = () => sql<{ at: Date | null }[]>`
    select histories_swept_at as at from deleted_projects where slug = ${p.slug}`;

  // Within the hour the daily run leaves it: a workflow of the project may still start one.
  const retention = temporal.schedule.getHandle(RETENTION_SCHEDULE_ID);
  const runs = async () => (await retention.describe()).info.numActionsTaken;
  const before = await runs();
  await retention.trigger();
  await eventually(async () => (await runs()) > before, 30_000);
  await eventually(async () => (await retention.describe()).info.runningActions.length === 0);
  expect(await swept()).toEqual([{ at: null }]);
  expect(await workflowsOf(p.slug)).toBe(1);

  await sql`update deleted_projects set deleted_at = deleted_at - interval '61 minutes'
    where slug = ${p.slug}`;
  await retention.trigger();
  await eventually(async () => (await swept())[0]?.at !== null, 30_000);
  await eventually(async () => (await workflowsOf(p.slug)) === 0, 60_000);
  await expect(escaped.fetchHistory()).rejects.toThrow(/workflow not found/);
}, 180_000);
