import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { HELD_PLACE_MS } from "../core/waiting.ts";
import { projectWithEndpoint, stack } from "../test/helpers.ts";
import { pauseTarget } from "./circuits.ts";
import { connect } from "./db.ts";
import { holdDelivery } from "./held.ts";
import { admitHeld, heldCount, lapsePlaces, releasePlaces } from "./waiting.ts";

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

test("a place taken for a held target counts until a worker holds the delivery, and goes back when released, lapsed or let go", async () => {
  const caps = { free: 10, paid: 10 };
  const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/none" }]);
  const [ids] = await sql<{ projectId: string; targetId: string }[]>`
    select e.project_id, t.id as target_id from targets t join endpoints e on e.id = t.endpoint_id
      join projects p on p.id = e.project_id
    where p.slug = ${p.slug}`;
  const { projectId, targetId } = ids as { projectId: string; targetId: string };
  await pauseTarget(sql, targetId, true);
  const now = new Date();
  const place = (requestId: string) =>
    sql.begin((tx) =>
      admitHeld(tx, { projectId, requestId, targetIds: [targetId], now, cap: 2 }, caps),
    );

  expect([await place("r1"), await place("r2"), await place("r3")]).toEqual([true, true, false]);
  expect(await heldCount(sql, projectId)).toBe(2);
  // The worker holds r1: its place becomes the held delivery, counted once.
  expect(await holdDelivery(sql, targetId, "r1", caps)).toBe("paused");
  expect(await heldCount(sql, projectId)).toBe(2);
  // A start that failed gives its place back; one never started lapses.
  await sql.begin((tx) => releasePlaces(tx, "r2", caps, [targetId]));
  expect(await heldCount(sql, projectId)).toBe(1);
  expect(await place("r4")).toBe(true);
  expect(await lapsePlaces(sql, now, caps)).toBe(0);
  expect(await lapsePlaces(sql, new Date(now.getTime() + HELD_PLACE_MS), caps)).toBe(1);
  expect(await heldCount(sql, projectId)).toBe(1);
  // Resumed, the target's places go back (those calls go on); its held delivery waits to go.
  expect(await place("r5")).toBe(true);
  await pauseTarget(sql, targetId, false);
  expect(await heldCount(sql, projectId)).toBe(1);
});
