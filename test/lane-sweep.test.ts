/**
 * The control plane's sweep of lane heads (control/lane-sweep.ts) on the real stack: a head whose
 * workflow does not run (terminated by hand, or its edge died between its join and its start)
 * would hold its key for good; the sweep passes it over and the request parked behind it goes.
 * A head whose workflow runs but missed its turn's signal is told again, and a turn given but
 * never signalled is told within seconds by the sweep of owed turns. A turn whose batch let the
 * request go on alone reaches the request's own workflow, whether that batch ended or runs on.
 */
import { afterAll, expect, test } from "vitest";
import { sweepLaneHeads } from "../control/lane-sweep.ts";
import { deriveIdKey, idDigest } from "../core/id-digest.ts";
import { laneIdOf } from "../core/lanes.ts";
import { BATCH_WORKFLOW } from "../core/temporal.ts";
import { signalTurns } from "../platform/temporal.ts";
import { connect } from "../store/db.ts";
import { claimTurns, joinLane, leaveLane, passTurns } from "../store/lanes.ts";
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

/** An ordered project whose lane "k" has a head that never started, and a call parked behind it. */
async function parkedBehindAHead(headId: string) {
  const project = await projectWithEndpoint([{ name: "origin", targetUrl: target.url }], {
    ordering: "fifo",
  });
  const digest = await idDigest(await deriveIdKey(stack().encryptionKey));
  const laneId = await laneIdOf(project.slug, { line: "v1", path: "hook" }, "k", digest);
  const [origin] = await sql<{ id: string }[]>`
    select t.id from targets t join endpoints e on e.id = t.endpoint_id
      join projects p on p.id = e.project_id
    where p.slug = ${project.slug}`;
  const targetIds = [origin?.id ?? ""];
  // A place joined and given the turn, whose workflow never started.
  await sql.begin(async (tx) => {
    await joinLane(tx, laneId, headId, targetIds);
    await claimTurns(tx, laneId, headId, targetIds);
  });
  const since = target.received.length;
  const answer = await relay(project.slug, "/v1/hook", {
    key: project.key,
    body: "{}",
    headers: { "relay-ordering-key": "k" },
  });
  expect(answer.status).toBe(202);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(target.received.length).toBe(since);
  return { project, laneId, targetIds, requestId: answer.json().requestId as string, since };
}

const temporal = relayTemporal();
const sweep = () => {
  const logError = (fields: Record<string, unknown>, message: string) => {
    throw new Error(`${message}: ${JSON.stringify(fields)}`);
  };
  return sweepLaneHeads({ sql, temporal: () => temporal, logError, logWarn: () => {} }, 0);
};

test("a head whose workflow never ran is passed over by the sweep, and the request behind it is delivered", async () => {
  const { project, requestId, since } = await parkedBehindAHead("req_never_started");
  expect(await sweep()).toBeGreaterThan(0);
  expect((await finishedLog(project, requestId)).status).toBe("delivered");
  expect(target.received.length).toBe(since + 1);
});

test("a head whose workflow runs but missed its turn's signal is told again by the sweep, and delivers", async () => {
  const { project, laneId, requestId, since } = await parkedBehindAHead("req_left_untold");
  // The head left, and the turn passed on, but the signal to the parked request was lost.
  await sql`update lane_entries set done_at = now() where lane_id = ${laneId}
    and request_id = 'req_left_untold'`;
  await sql`update lane_entries set turn = true where lane_id = ${laneId}
    and request_id = ${requestId}`;
  await sweep();
  expect((await finishedLog(project, requestId)).status).toBe("delivered");
  expect(target.received.length).toBe(since + 1);
});

test("a turn passed on whose signal was never sent (its sender died, or Temporal was down) is told within seconds, unasked", async () => {
  const { project, laneId, targetIds, requestId, since } =
    await parkedBehindAHead("req_died_untold");
  // The head leaves as a worker's or an edge's leave does, and the turn's signal is never sent.
  const given = await sql.begin((tx) => leaveLane(tx, laneId, "req_died_untold", targetIds));
  expect(given.map((g) => g.requestId)).toEqual([requestId]);
  // No sweep called here: the control plane's own finds the turn owed.
  expect((await finishedLog(project, requestId, 60_000)).status).toBe("delivered");
  expect(target.received.length).toBe(since + 1);
}, 90_000);

/**
 * The request parked behind `headId` is parked under `batchId` again, as a batch's activity
 * outliving its run (workflows/batch-aborts.ts) parks a request its batch had let go on alone;
 * then the head leaves as a worker's leave does, its turn told where the entry says.
 */
async function reparkedThenHeadLeaves(
  parked: Awaited<ReturnType<typeof parkedBehindAHead>>,
  headId: string,
  batchId: string,
) {
  const { laneId, targetIds, requestId } = parked;
  await sql`update lane_entries set carrier = ${batchId}, parked = true
    where lane_id = ${laneId} and request_id = ${requestId}`;
  const client = await temporal;
  await passTurns(sql, [{ laneId, requestId: headId, targetIds }], (given) =>
    signalTurns(client, given),
  );
}

test("a turn whose batch is gone reaches the request's own workflow, which the batch had let it go on as", async () => {
  // Parked in its own workflow, as one a batch let go on is (the batch unparked it first).
  const parked = await parkedBehindAHead("req_zombie");
  await reparkedThenHeadLeaves(parked, "req_zombie", "batch_ended");
  expect((await finishedLog(parked.project, parked.requestId)).status).toBe("delivered");
  expect(target.received.length).toBe(parked.since + 1);
}, 60_000);

test("a turn whose batch runs on without the request (it let it go on alone) reaches the request's own workflow within seconds", async () => {
  const parked = await parkedBehindAHead("req_runs_on");
  // A batch that runs on, on a queue no worker polls: a tell for a request it let go is lost there.
  const batch = await (await temporal).workflow.start(BATCH_WORKFLOW, {
    taskQueue: "nobody-polls-this",
    workflowId: `batch-runs-on-${parked.project.slug}`,
    args: [],
  });
  try {
    await reparkedThenHeadLeaves(parked, "req_runs_on", batch.workflowId);
    // The batch was told; the control plane's sweep of owed turns tells the request's own workflow.
    expect((await finishedLog(parked.project, parked.requestId, 60_000)).status).toBe("delivered");
    expect(target.received.length).toBe(parked.since + 1);
  } finally {
    await batch.terminate();
  }
}, 90_000);
