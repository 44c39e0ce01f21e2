/**
 * The control plane's sweep of lane heads (control/lane-sweep.ts) on the real stack: a head whose
 * workflow does not run (terminated by hand, or its edge died between its join and its start)
 * would hold its key for good; the sweep passes it over and the request parked behind it goes.
 */
import { afterAll, expect, test } from "vitest";
import { sweepLaneHeads } from "../control/lane-sweep.ts";
import { laneIdOf } from "../core/lanes.ts";
import { connect } from "../store/db.ts";
import { claimTurns, joinLane } from "../store/lanes.ts";
import {
  finishedLog,
  projectWithEndpoint,
  relay,
  relayTemporal,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const target = await targetServer();
afterAll(async () => {
  await target.close();
  await sql.end();
});

test("a head whose workflow never ran is passed over by the sweep, and the request behind it is delivered", async () => {
  const project = await projectWithEndpoint([{ name: "origin", targetUrl: target.url }], {
    ordering: "fifo",
  });
  const laneId = await laneIdOf(project.slug, { line: "v1", path: "hook" }, "k");
  const [origin] = await sql<{ id: string }[]>`
    select t.id from targets t join endpoints e on e.id = t.endpoint_id
      join projects p on p.id = e.project_id
    where p.slug = ${project.slug}`;
  const targetIds = [origin?.id ?? ""];
  // A place joined and given the turn, whose workflow never started.
  await sql.begin(async (tx) => {
    await joinLane(tx, laneId, "req_never_started", targetIds);
    await claimTurns(tx, laneId, "req_never_started", targetIds);
  });
  const answer = await relay(project.slug, "/v1/hook", {
    key: project.key,
    body: "{}",
    headers: { "relay-ordering-key": "k" },
  });
  expect(answer.status).toBe(202);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(target.received).toHaveLength(0);

  const temporal = relayTemporal();
  const logError = (fields: Record<string, unknown>, message: string) => {
    throw new Error(`${message}: ${JSON.stringify(fields)}`);
  };
  expect(await sweepLaneHeads({ sql, temporal: () => temporal, logError }, 0)).toBeGreaterThan(0);
  expect((await finishedLog(project, answer.json().requestId)).status).toBe("delivered");
  expect(target.received).toHaveLength(1);
});
