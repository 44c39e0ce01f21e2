import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { connect } from "./db.ts";
import { heldCount } from "./waiting.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
afterAll(() => sql.end());

test("a project's ordered requests in their lanes are counted as they come and go, in sets, whoever removes them", async () => {
  const [project, other] = [newId("count"), newId("count")];
  const wait = (projectId: string, from: number, to: number, joinedAt = new Date()) => sql`
    insert into lane_waits (request_id, project_id, lane_id, joined_at)
    select ${projectId} || '-' || g, ${projectId}, 'lane', ${joinedAt}
    from generate_series(${from}::int, ${to}::int) g`;
  await wait(project, 1, 5);
  await wait(other, 1, 2);
  expect([await heldCount(sql, project), await heldCount(sql, other)]).toEqual([5, 2]);
  await sql`delete from lane_waits where request_id = any(${[`${project}-1`, `${project}-2`]})`;
  expect(await heldCount(sql, project)).toBe(3);
  // The retention's sweep forgets waits past the log's retention, in every project at once.
  const old = new Date(Date.now() - 40 * 86_400_000);
  await Promise.all([wait(project, 6, 7, old), wait(other, 3, 3, old)]);
  expect([await heldCount(sql, project), await heldCount(sql, other)]).toEqual([5, 3]);
  await sql`delete from lane_waits where project_id = any(${[project, other]}) and joined_at < ${new Date(Date.now() - 86_400_000)}`;
  expect([await heldCount(sql, project), await heldCount(sql, other)]).toEqual([3, 2]);
  await sql`delete from lane_waits where project_id = any(${[project, other]})`;
  expect([await heldCount(sql, project), await heldCount(sql, other)]).toEqual([0, 0]);
});
