import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { HELD_PLACE_MS } from "../core/waiting.ts";
import { projectWithEndpoint, stack } from "../test/helpers.ts";
import { pauseTarget } from "./circuits.ts";
import { connect, type Queryable } from "./db.ts";
import { holdDelivery } from "./held.ts";
import { admitHeld, admitScheduled, heldCount, lapsePlaces, releasePlaces } from "./waiting.ts";

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
  // A day back: lapsing places lapses every project's, and only this test's are that old (other
  // files' tests, running meanwhile, keep theirs).
  const now = new Date(Date.now() - 86_400_000);
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

/** A project of its own (no endpoint), as the waiting tables name it. */
async function bareProject(): Promise<string> {
  const id = newId("prj");
  await sql`insert into projects (id, slug, name, plan) values (${id}, ${id}, 'waiting', 'paid')`;
  return id;
}

/**
 * Rows of `table` that `run` reads, in its transaction (rolled back): the table's and its
 * indexes' reads, from this transaction's own statistics.
 */
async function rowsRead(table: string, run: (tx: Queryable) => Promise<unknown>): Promise<number> {
  let read = 0;
  await sql
    .begin(async (tx) => {
      await run(tx);
      const [row] = await tx<{ read: number }[]>`
        select (select coalesce(sum(seq_tup_read), 0) from pg_stat_xact_user_tables
          where relname = ${table})
        + (select coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0) from pg_index
          where indrelid = ${table}::regclass) as read`;
      read = Number(row?.read);
      throw new Error("rolled back");
    })
    .catch((error: unknown) => {
      if (!(error instanceof Error && error.message === "rolled back")) throw error;
    });
  return read;
}

/** Rows of `scheduled_calls` a delayed call's admission reads. */
const rowsReadAdmitting = (projectId: string, cap: number) =>
  rowsRead("scheduled_calls", async (tx) => {
    const now = new Date();
    const notBefore = new Date(now.getTime() + 60_000);
    const requestId = newId("req");
    expect(await admitScheduled(tx, { projectId, requestId, notBefore, now, cap })).toBe(true);
  });

test("a delayed call's admission reads as few rows with 20,000 delayed calls waiting as with 10", async () => {
  const [few, many] = [await bareProject(), await bareProject()];
  const waiting = (projectId: string, n: number) => sql`
    insert into scheduled_calls (request_id, project_id, not_before)
    select ${projectId} || '-' || g, ${projectId}, now() + interval '1 day'
    from generate_series(1, ${n}::int) g`;
  await waiting(few, 10);
  await waiting(many, 20_000);
  await sql`analyze scheduled_calls`;
  const [readFew, readMany] = [
    await rowsReadAdmitting(few, 100_000),
    await rowsReadAdmitting(many, 100_000),
  ];
  expect(readMany).toBeLessThanOrEqual(readFew + 10);
  await sql`delete from projects where id = any(${[few, many]})`;
});

test("delayed calls are counted as they come and go: admitted to the cap, a repeat keeping its place, due ones leaving", async () => {
  const projectId = await bareProject();
  const now = new Date();
  const at = (ms: number) => new Date(now.getTime() + ms);
  const admit = (requestId: string, notBefore: Date, cap = 3, when = now) =>
    sql.begin((tx) => admitScheduled(tx, { projectId, requestId, notBefore, now: when, cap }));
  expect([
    await admit("a", at(1_000)),
    await admit("b", at(60_000)),
    await admit("c", at(60_000)),
    await admit("d", at(60_000)),
  ]).toEqual([true, true, true, false]);
  expect(await admit("b", at(60_000))).toBe(true);
  // "a" is due 2 s on: it leaves the count, and "d" finds its place.
  expect(await admit("d", at(60_000), 3, at(2_000))).toBe(true);
  expect(await admit("e", at(60_000), 3, at(2_000))).toBe(false);
  await sql`delete from projects where id = ${projectId}`;
});

test("a project's waiting count reads as few held deliveries with 20,000 held as with 10", async () => {
  const projects = await Promise.all(
    [10, 20_000].map(async (n) => {
      const p = await projectWithEndpoint([{ name: "t", targetUrl: "http://127.0.0.1:9/none" }]);
      const [ids] = await sql<{ projectId: string; targetId: string }[]>`
        select e.project_id, t.id as target_id from targets t
          join endpoints e on e.id = t.endpoint_id join projects p on p.id = e.project_id
        where p.slug = ${p.slug}`;
      const { projectId, targetId } = ids as { projectId: string; targetId: string };
      await sql`
        insert into held_deliveries (target_id, workflow_id, request_id)
        select ${targetId}, ${projectId} || '-' || g, ${projectId} || '-' || g
        from generate_series(1, ${n}::int) g`;
      return { projectId, n };
    }),
  );
  await sql`analyze held_deliveries`;
  const read = await Promise.all(
    projects.map(({ projectId, n }) =>
      rowsRead("held_deliveries", async (tx) => expect(await heldCount(tx, projectId)).toBe(n)),
    ),
  );
  expect(read[1]).toBeLessThanOrEqual((read[0] ?? 0) + 10);
});
