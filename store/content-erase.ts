/**
 * Erasing what the log keeps of finished requests (migrations 016, 036): their headers and body
 * (a body stored by reference in `bodies` included) and their attempts' answers, in one statement
 * each time; the row, its status and its attempts stay for the log's retention (./retention.ts).
 * A member erases one request at once; the daily run erases those past their project's
 * retention of content. A request still under way keeps its content: its deliveries need it.
 */
import { finishedStatuses } from "../core/model.ts";
import type { Queryable, Sql } from "./db.ts";

/**
 * Erases the content of the finished requests `chosen` selects (a fragment answering `id`s);
 * answers the ids erased. A request erased before keeps its first erase's time.
 */
function eraseChosen(q: Queryable, chosen: ReturnType<Sql>, at: Date) {
  return q<{ id: string; contentErasedAt: Date }[]>`
    with erased as (
      update requests r
      set headers = null, body = null, content_erased_at = coalesce(r.content_erased_at, ${at})
      where r.id in (${chosen}) and r.status in ${q(finishedStatuses)}
      returning r.id, r.body_ref, r.content_erased_at
    ), bodies_gone as (
      delete from bodies b using erased e where b.request_id in (e.id, e.body_ref)
    ), answers_gone as (
      update attempts a
      set response_headers = null, response_body = null, response_truncated = false
      from erased e
      where a.request_id = e.id and (a.response_headers is not null or a.response_body is not null)
    )
    select id, content_erased_at from erased`;
}

/**
 * Erases one finished request's content; answers when it was erased (its first erase), or
 * undefined when the project has no such request, or it is under way.
 */
export async function eraseRequestContent(
  sql: Sql,
  projectId: string,
  requestId: string,
  at: Date,
): Promise<Date | undefined> {
  const [erased] = await eraseChosen(
    sql,
    sql`select id from requests where id = ${requestId} and project_id = ${projectId}`,
    at,
  );
  return erased?.contentErasedAt;
}

/**
 * Erases the content of up to `limit` finished requests received longer ago than their project
 * keeps content (`projects.content_retention_days`); answers how many. Each project's are found
 * along its (project, received) index.
 */
export async function eraseAgedContent(sql: Sql, now: Date, limit: number): Promise<number> {
  const erased = await eraseChosen(
    sql,
    sql`
      select aged.id from projects p cross join lateral (
        select r.id from requests r
        where r.project_id = p.id
          and r.received_at < ${now}::timestamptz - make_interval(days => p.content_retention_days)
          and r.content_erased_at is null and r.status in ${sql(finishedStatuses)}
        order by r.received_at
        limit ${limit}) aged
      where p.content_retention_days is not null
      limit ${limit}`,
    now,
  );
  return erased.length;
}

/** A project's retention of content in days; null: as long as the log keeps its requests. */
export async function contentRetentionDays(sql: Sql, projectId: string): Promise<number | null> {
  const [row] = await sql<{ days: number | null }[]>`
    select content_retention_days as days from projects where id = ${projectId}`;
  return row?.days ?? null;
}

export async function setContentRetentionDays(
  sql: Sql,
  projectId: string,
  days: number | null,
): Promise<void> {
  await sql`update projects set content_retention_days = ${days} where id = ${projectId}`;
}
