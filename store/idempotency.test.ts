import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { connect } from "./db.ts";
import { claimKeys, forgetKeys, pruneKeys } from "./idempotency.ts";
import { openRequest } from "./request-log.ts";

const sql = connect(stack().databaseUrl, { max: 6 });
const project = newId("prj");
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'keys', 'paid')`;
afterAll(async () => {
  await sql`delete from idempotency_keys where project_id = ${project}`;
  await sql`delete from projects where id = ${project}`;
  await sql.end();
});

const claim = (bodyTag = "tag") => ({ requestId: newId("req"), bodyTag });

test("a key is the first claim's: a later one is a repeat with its body, a reuse with another, or told the first went alone", async () => {
  const batched = claim();
  const alone = claim();
  expect(await claimKeys(sql, project, [batched], false)).toEqual(["claimed"]);
  expect(await claimKeys(sql, project, [alone], true)).toEqual(["claimed"]);
  expect(
    await claimKeys(
      sql,
      project,
      [batched, { ...batched, bodyTag: "other" }, alone, { ...alone, bodyTag: "other" }],
      false,
    ),
  ).toEqual(["repeat", "reused", "own_workflow", "own_workflow"]);
  // A claim that went another way is forgotten: the key is free again.
  await forgetKeys(sql, [batched]);
  expect(await claimKeys(sql, project, [batched], true)).toEqual(["claimed"]);
});

test("of two transactions claiming one key at once, one has it and the other waits and finds it", async () => {
  const key = claim();
  const outcomes = await Promise.all(
    [0, 1].map((i) =>
      sql.begin(async (tx) => {
        const outcome = await claimKeys(tx, project, [key], false);
        // Held open a moment, so the other claim meets this one's uncommitted row.
        await tx`select pg_sleep(${i === 0 ? 0.2 : 0})`;
        return outcome;
      }),
    ),
  );
  expect(outcomes.flat().sort()).toEqual(["claimed", "repeat"]);
});

test("the retention forgets keys claimed before its cutoff, except a request's still under way", async () => {
  const [done, underWay, recent] = [claim(), claim(), claim()];
  await claimKeys(sql, project, [done, underWay, recent], false);
  await sql`
    update idempotency_keys set claimed_at = now() - interval '2 days'
    where request_id in ${sql([done.requestId, underWay.requestId])}`;
  await openRequest(sql, {
    requestId: underWay.requestId,
    project,
    line: "v1",
    endpoint: "hook",
    keyMode: "live",
    receivedAt: new Date().toISOString(),
    bodyBytes: 2,
  });
  await pruneKeys(sql, new Date(Date.now() - 86_400_000), 1000);
  const left = await sql<{ requestId: string }[]>`
    select request_id from idempotency_keys where project_id = ${project}
      and request_id in ${sql([done.requestId, underWay.requestId, recent.requestId])}`;
  expect(left.map((row) => row.requestId).sort()).toEqual(
    [underWay.requestId, recent.requestId].sort(),
  );
});
