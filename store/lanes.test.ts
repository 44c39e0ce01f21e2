import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { connect } from "./db.ts";
import {
  claimTurns,
  claimTurnsInOrder,
  forgetPlace,
  joinLane,
  leaveLane,
  owedTurns,
  passTurns,
  pruneLaneEntries,
  releaseCarried,
  stillHeads,
  type TurnGiven,
  turnsTold,
} from "./lanes.ts";

const sql = connect(stack().databaseUrl, { max: 8 });
const lanes: string[] = [];
const newLane = () => {
  const laneId = `lane:store-test:${newId("x")}`;
  lanes.push(laneId);
  return laneId;
};
afterAll(async () => {
  await sql`delete from lane_entries where lane_id = any(${lanes}::text[])`;
  await sql.end();
});

const join = (laneId: string, requestId: string, targetIds = ["a"]) =>
  sql.begin((tx) => joinLane(tx, laneId, requestId, targetIds));
const claim = (laneId: string, requestId: string, targetIds = ["a"]) =>
  sql.begin((tx) => claimTurns(tx, laneId, requestId, targetIds));
const leave = (laneId: string, requestId: string, targetIds = ["a"]) =>
  sql.begin((tx) => leaveLane(tx, laneId, requestId, targetIds));

test("the head has the turn; the others park, and leaving gives the turn to the next, told when parked", async () => {
  const lane = newLane();
  for (const r of ["r1", "r2", "r3"]) expect(await join(lane, r)).toBe(true);
  expect(await join(lane, "r2")).toBe(false); // a repeated join joins nothing
  expect(await claim(lane, "r2")).toEqual({ a: "wait" });
  expect(await claim(lane, "r1")).toEqual({ a: "turn" });
  expect(await claim(lane, "r1")).toEqual({ a: "turn" }); // a retried claim
  expect(await leave(lane, "r1")).toEqual([
    { laneId: lane, requestId: "r2", targetId: "a", workflowId: "r2" },
  ]);
  // r3 never claimed: it is given its turn when r2 leaves, and finds it when it claims.
  expect(await leave(lane, "r2")).toEqual([]);
  expect(await claim(lane, "r3")).toEqual({ a: "turn" });
  expect(await leave(lane, "r3")).toEqual([]);
  // A join after its request left (an Idempotency-Key's repeat) joins nothing.
  expect(await join(lane, "r1")).toBe(false);
});

test("a place given back is forgotten once left: the same request joins again, at the back", async () => {
  const lane = newLane();
  for (const r of ["r1", "r2"]) await join(lane, r);
  await forgetPlace(sql, { laneId: lane, requestId: "r1", targetIds: ["a"] }); // still there
  expect(await join(lane, "r1")).toBe(false);
  await leave(lane, "r1");
  await forgetPlace(sql, { laneId: lane, requestId: "r1", targetIds: ["a"] });
  expect(await join(lane, "r1")).toBe(true);
  expect(await claim(lane, "r1")).toEqual({ a: "wait" });
  expect(await claim(lane, "r2")).toEqual({ a: "turn" });
});

test("each target is a queue of its own; a request leaving one target keeps its place at the other", async () => {
  const lane = newLane();
  await join(lane, "r1", ["a", "b"]);
  await join(lane, "r2", ["a", "b"]);
  expect(await claim(lane, "r2", ["a", "b"])).toEqual({ a: "wait", b: "wait" });
  expect(await leave(lane, "r1", ["b"])).toEqual([
    { laneId: lane, requestId: "r2", targetId: "b", workflowId: "r2" },
  ]);
  expect(await claim(lane, "r2", ["a", "b"])).toEqual({ a: "wait", b: "turn" });
  // A cancelled request that was not the head leaves without giving anyone the turn.
  expect(await leave(lane, "r2", ["a", "b"])).toEqual([]);
  expect(await leave(lane, "r1", ["a"])).toEqual([]);
});

test("a batch carries its parked requests: their turns are told to it, or kept when it leaves itself", async () => {
  const lane = newLane();
  for (const r of ["r1", "r2", "r3"]) await join(lane, r);
  const claims = ["r1", "r2", "r3"].map((requestId) => ({
    laneId: lane,
    requestId,
    targetIds: ["a"],
  }));
  expect(await sql.begin((tx) => claimTurnsInOrder(tx, claims, "batch-1"))).toEqual([
    { a: "turn" },
    { a: "wait" },
    { a: "wait" },
  ]);
  const told: TurnGiven[] = [];
  const tell = async (given: TurnGiven[]) => {
    told.push(...given);
    return [];
  };
  // The batch leaving r1 keeps r2's turn (it attempts it itself); another leaver tells the batch.
  const mine = (given: TurnGiven) => given.workflowId === "batch-1" && given.requestId === "r2";
  const kept = await passTurns(
    sql,
    [{ laneId: lane, requestId: "r1", targetIds: ["a"] }],
    tell,
    mine,
  );
  expect(kept).toEqual([{ laneId: lane, requestId: "r2", targetId: "a", workflowId: "batch-1" }]);
  expect(await passTurns(sql, [{ laneId: lane, requestId: "r2", targetIds: ["a"] }], tell)).toEqual(
    [],
  );
  expect(told).toEqual([{ laneId: lane, requestId: "r3", targetId: "a", workflowId: "batch-1" }]);
});

test("a request its batch let go is not passed over when the gone batch's signal fails", async () => {
  const lane = newLane();
  for (const r of ["r1", "r2"]) await join(lane, r);
  await claim(lane, "r1");
  const claims = [{ laneId: lane, requestId: "r2", targetIds: ["a"] }];
  await sql.begin((tx) => claimTurnsInOrder(tx, claims, "batch-2"));
  await releaseCarried(sql, "batch-2", ["r2"]);
  // r1 leaves; had r2 still been carried by the gone batch, it would leave too.
  const gone = async (given: TurnGiven[]) => given;
  await passTurns(sql, [{ laneId: lane, requestId: "r1", targetIds: ["a"] }], gone);
  expect(await claim(lane, "r2")).toEqual({ a: "turn" });
  const [entry] = await sql<{ doneAt: Date | null }[]>`
    select done_at from lane_entries where lane_id = ${lane} and request_id = 'r2'`;
  expect(entry?.doneAt).toBeNull();
  // Its carrier gone, a parked entry is left on its behalf, so the lane goes on.
  await join(lane, "r3");
  const r3 = [{ laneId: lane, requestId: "r3", targetIds: ["a"] }];
  await sql.begin((tx) => claimTurnsInOrder(tx, r3, "batch-3"));
  await passTurns(sql, [{ laneId: lane, requestId: "r2", targetIds: ["a"] }], gone);
  expect(
    (await sql`select 1 from lane_entries where lane_id = ${lane} and done_at is null`).count,
  ).toBe(0);
});

test("a request with no entry (its place left on its behalf) is not held back", async () => {
  const lane = newLane();
  expect(await claim(lane, "nobody", ["a"])).toEqual({ a: "turn" });
});

test("concurrent joins of one lane each take a place, in one order every target agrees on", async () => {
  const lane = newLane();
  const ids = Array.from({ length: 40 }, (_, i) => `r${i}`);
  await Promise.all(ids.map((id) => join(lane, id, ["a", "b"])));
  const order = (target: string) =>
    sql<{ requestId: string }[]>`
      select request_id from lane_entries where lane_id = ${lane} and target_id = ${target}
      order by seq`.then((rows) => rows.map((r) => r.requestId));
  const a = await order("a");
  expect(a).toHaveLength(40);
  expect(await order("b")).toEqual(a);
  // Drained in that order, one at a time: each has the turn only once the one before left.
  for (const [i, id] of a.entries()) {
    const next = a[i + 1];
    if (next) expect(await claim(lane, next)).toEqual({ a: "wait" });
    expect(await claim(lane, id)).toEqual({ a: "turn" });
    await leave(lane, id, ["a"]);
  }
});

test("a leave, its statements pipelined, waits for its lane's lock before it touches a row: meanwhile it holds none", async () => {
  const lane = newLane();
  for (const r of ["r1", "r2"]) await join(lane, r);
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let lockTaken = () => {};
  const taken = new Promise<void>((resolve) => {
    lockTaken = resolve;
  });
  // Another transaction holds the lane's lock (a join takes it) until it commits.
  const holder = sql.begin(async (tx) => {
    await joinLane(tx, lane, "r3", ["a"]);
    lockTaken();
    await released;
  });
  await taken;
  const leaving = passTurns(sql, [{ laneId: lane, requestId: "r1", targetIds: ["a"] }], () =>
    Promise.resolve([]),
  );
  await new Promise((resolve) => setTimeout(resolve, 200)); // its statements reach Postgres
  const rowsFree = await sql`
    select 1 from lane_entries where lane_id = ${lane} for update nowait`.then(
    () => true,
    () => false,
  );
  release();
  await holder;
  expect(await leaving).toEqual([]);
  expect(rowsFree).toBe(true);
  expect(await claim(lane, "r2")).toEqual({ a: "turn" });
});

test("a turn given to a parked request is owed until its carrier claims it or is told again, looked at once per interval", async () => {
  const lane = newLane();
  const owed = async () =>
    (await owedTurns(sql, 0, 10_000)).filter((t) => t.laneId === lane).map((t) => t.requestId);
  for (const r of ["r1", "r2", "r3", "r4"]) await join(lane, r);
  await claim(lane, "r1");
  for (const r of ["r2", "r3"]) await claim(lane, r);
  expect(await owed()).toEqual([]); // parked, no turn given yet
  await leave(lane, "r1");
  expect(await owed()).toEqual(["r2"]);
  // Owed a minute: found once, then looked at, so another sweep (a second control plane's)
  // passes it by for as long.
  await sql`update lane_entries set changed_at = now() - interval '1 minute' where lane_id = ${lane}`;
  const owedFor5s = async () =>
    (await owedTurns(sql, 5_000, 10_000)).filter((t) => t.laneId === lane).map((t) => t.requestId);
  expect(await owedFor5s()).toEqual(["r2"]);
  expect(await owedFor5s()).toEqual([]);
  expect(await claim(lane, "r2")).toEqual({ a: "turn" }); // its carrier took it up
  expect(await owed()).toEqual([]);
  await leave(lane, "r2");
  expect(await owed()).toEqual(["r3"]);
  await turnsTold(sql, [{ laneId: lane, requestId: "r3", targetId: "a", workflowId: "r3" }]);
  expect(await owed()).toEqual([]);
  // A retried leave tells again: owed again. r4 never claimed (not parked): its claim finds it.
  expect(await leave(lane, "r2")).toEqual([
    { laneId: lane, requestId: "r3", targetId: "a", workflowId: "r3" },
  ]);
  expect(await owed()).toEqual(["r3"]);
  await leave(lane, "r3");
  expect(await owed()).toEqual([]);
});

test("a head that has not moved is found once per interval; left entries are pruned", async () => {
  const lane = newLane();
  await join(lane, "stuck");
  await claim(lane, "stuck");
  await sql`update lane_entries set changed_at = now() - interval '1 hour' where lane_id = ${lane}`;
  const found = await stillHeads(sql, 10 * 60_000, 1000);
  expect(found.filter((h) => h.laneId === lane)).toEqual([
    { laneId: lane, targetId: "a", requestId: "stuck", workflowId: "stuck" },
  ]);
  const again = await stillHeads(sql, 10 * 60_000, 1000);
  expect(again.filter((h) => h.laneId === lane)).toEqual([]);
  await leave(lane, "stuck");
  await sql`update lane_entries set done_at = now() - interval '40 days' where lane_id = ${lane}`;
  expect(await pruneLaneEntries(sql, new Date(Date.now() - 30 * 86_400_000), 1000)).toBeGreaterThan(
    0,
  );
  expect((await sql`select 1 from lane_entries where lane_id = ${lane}`).count).toBe(0);
});

test("still heads are looked up projects in turn: one project's many do not hold back another's", async () => {
  const busy = Array.from({ length: 4 }, () => newLane());
  const quiet = `lane:store-quiet-${newId("p").slice(-8)}:${newId("x")}`;
  lanes.push(quiet);
  for (const lane of [...busy, quiet]) {
    await join(lane, `still-${lane}`);
    await claim(lane, `still-${lane}`);
  }
  // The busy project's heads have been still longest, the last of them the longest of all.
  for (const [i, lane] of busy.entries()) {
    await sql`update lane_entries set changed_at = now() - make_interval(days => 200, hours => ${i})
      where lane_id = ${lane}`;
  }
  await sql`update lane_entries set changed_at = now() - interval '100 days' where lane_id = ${quiet}`;
  const found = await stillHeads(sql, 10 * 60_000, 2);
  expect(found.map((h) => h.laneId).sort()).toEqual([busy[3], quiet].sort());
});
