/** Schedules (core/schedules.ts) as Postgres keeps them: the call each fire sends, and its last fire. */
import type { KeyMode } from "../core/model.ts";
import type { Queryable, Sql } from "./db.ts";

export interface ScheduleSpec {
  cron: string;
  timeZone: string;
  /** The JSON body each fire sends, as text; null: none. */
  body: string | null;
  headers: Record<string, string>;
  mode: KeyMode;
  paused: boolean;
  note: string;
}

export interface ScheduleRow extends ScheduleSpec {
  scheduleId: string;
  projectId: string;
  endpointId: string;
  /** The project's slug and the endpoint as `{line}/{endpoint}`, as they are named now. */
  project: string;
  endpoint: string;
  fires: number;
  lastFiredAt: Date | null;
  lastStatus: number | null;
  lastRequestId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A schedule as a list shows it: all but its call's body and headers (64 KiB each, at most). */
export type ScheduleSummary = Omit<ScheduleRow, "body" | "headers">;

const summaryColumns = (sql: Queryable) => sql`
  s.id as "scheduleId", s.project_id as "projectId", p.slug as project, s.endpoint_id as "endpointId",
  e.line_key || '/' || e.path as endpoint, s.cron, s.time_zone as "timeZone", s.mode, s.paused,
  s.note, s.fires, s.last_fired_at as "lastFiredAt", s.last_status as "lastStatus",
  s.last_request_id as "lastRequestId", s.created_at as "createdAt", s.updated_at as "updatedAt"`;

const joined = (sql: Queryable) => sql`
  schedules s join endpoints e on e.id = s.endpoint_id join projects p on p.id = s.project_id`;

export async function countSchedules(sql: Queryable, projectId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from schedules where project_id = ${projectId}`;
  return row?.n ?? 0;
}

export async function insertSchedule(
  sql: Queryable,
  row: { scheduleId: string; projectId: string; endpointId: string } & ScheduleSpec,
): Promise<void> {
  await sql`
    insert into schedules (id, project_id, endpoint_id, cron, time_zone, body, headers, mode, paused, note)
    values (${row.scheduleId}, ${row.projectId}, ${row.endpointId}, ${row.cron}, ${row.timeZone},
      ${row.body}, ${sql.json(row.headers)}, ${row.mode}, ${row.paused}, ${row.note})`;
}

/** One schedule; with `projectId`, only that project's. */
export async function findSchedule(
  sql: Queryable,
  scheduleId: string,
  projectId?: string,
): Promise<ScheduleRow | undefined> {
  const [row] = await sql<ScheduleRow[]>`
    select ${summaryColumns(sql)}, s.body, s.headers from ${joined(sql)}
    where s.id = ${scheduleId} ${projectId === undefined ? sql`` : sql`and s.project_id = ${projectId}`}`;
  return row;
}

/** A project's schedules, oldest first; with `endpointId`, that endpoint's. */
export async function listSchedules(
  sql: Queryable,
  projectId: string,
  endpointId?: string,
): Promise<ScheduleSummary[]> {
  return sql<ScheduleSummary[]>`
    select ${summaryColumns(sql)} from ${joined(sql)}
    where s.project_id = ${projectId}
    ${endpointId === undefined ? sql`` : sql`and s.endpoint_id = ${endpointId}`}
    order by s.created_at, s.id`;
}

/** The ids of a project's schedules. */
export async function listScheduleIds(sql: Queryable, projectId: string): Promise<string[]> {
  const rows = await sql<
    { id: string }[]
  >`select id from schedules where project_id = ${projectId}`;
  return rows.map((r) => r.id);
}

/** The ids of a line's schedules, or one endpoint's. */
export async function scheduleIdsOf(
  sql: Queryable,
  projectId: string,
  where: { line: string; path?: string },
): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select s.id from schedules s join endpoints e on e.id = s.endpoint_id
    where s.project_id = ${projectId} and e.line_key = ${where.line}
    ${where.path === undefined ? sql`` : sql`and e.path = ${where.path}`}`;
  return rows.map((r) => r.id);
}

export async function updateSchedule(
  sql: Queryable,
  scheduleId: string,
  spec: ScheduleSpec,
): Promise<void> {
  await sql`
    update schedules set cron = ${spec.cron}, time_zone = ${spec.timeZone}, body = ${spec.body},
      headers = ${sql.json(spec.headers)}, mode = ${spec.mode}, paused = ${spec.paused},
      note = ${spec.note}, updated_at = now()
    where id = ${scheduleId}`;
}

export async function deleteSchedule(sql: Sql, scheduleId: string): Promise<void> {
  await sql`delete from schedules where id = ${scheduleId}`;
}

/** How a fire went: what the edge answered it. */
export async function recordFire(
  sql: Queryable,
  scheduleId: string,
  fire: { at: Date; status: number; requestId: string | null },
): Promise<void> {
  await sql`
    update schedules set fires = fires + 1, last_fired_at = ${fire.at},
      last_status = ${fire.status}, last_request_id = ${fire.requestId}
    where id = ${scheduleId}`;
}
