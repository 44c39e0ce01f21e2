/**
 * Accepted before started (issue 27): an immediate async call is answered 202 once its
 * reservation and its workflow's start are kept in Postgres, and the edge makes the start after.
 * A start the edge cannot make is made by the control plane's sweep: the call is delivered all
 * the same. Meanwhile that edge answers only what it could start itself, so what waits for the
 * sweep is bounded. The edge here reaches Temporal's HTTP API through a proxy the test cuts.
 */
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, expect, test } from "vitest";
import { BATCH_WORKFLOW } from "../core/temporal.ts";
import { freePorts } from "../dev/ports.ts";
import { EdgeService, ReserveRefusal } from "../gen/relay/v1/edge_pb.ts";
import { KeyMode } from "../gen/relay/v1/keys_pb.ts";
import { claimDueStarts } from "../store/accepted-starts.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  extraEdge,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  spendDownTo,
  stack,
  targetServer,
} from "./helpers.ts";
import { edgeThroughTemporalProxy } from "./proxies.ts";
import { batchesOf } from "./starters.ts";

const {
  edge,
  temporalHttp,
  through: throughEdge,
} = await edgeThroughTemporalProxy("edge-accepts", {
  // Long enough that a second wave of calls, sent once the first is answered, joins its batch.
  RELAY_BATCH_LINGER_MS: "500",
});
const [doomedPort = 0] = await freePorts(1);
// Its batches wait long for calls to join them: one is open when the test kills it.
const doomedEdge = extraEdge("edge-doomed", doomedPort, {
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  RELAY_BATCH_LINGER_MS: "1000",
});
const throughDoomed = { edgeUrl: `http://127.0.0.1:${doomedPort}`, edgePort: doomedPort };

const sql = connect(stack().databaseUrl, { max: 1 });

beforeAll(() => Promise.all([edge.start(), doomedEdge.start()]));
afterAll(async () => {
  await sql.end();
  await Promise.all([edge.stop(), doomedEdge.stop()]);
  await temporalHttp.close();
});

test("a call accepted when its edge can no longer reach Temporal is delivered by the control plane's sweep; the edge's next calls get 503 until it reaches Temporal again", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const post = () => relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge });
  const delivered = (answer: Awaited<ReturnType<typeof post>>) =>
    finishedLog(p, answer.json().requestId as string, 30_000);

  expect((await delivered(await post())).status).toBe("delivered");

  temporalHttp.cut();
  const accepted = await post();
  expect(accepted.status).toBe(202);
  // Not in Temporal yet, nor in the log: read from the start kept for the sweep.
  const read = await api(p.ownerToken, "GET", `${p.base}/requests/${accepted.json().requestId}`);
  expect(read.status).toBe(200);
  expect(read.body).toMatchObject({ status: "queued", line: "v1", endpoint: "hook" });
  // Nothing to cancel yet; the caller is told to come back, not that there is no such request.
  const cancel = await api(p.ownerToken, "DELETE", `${p.base}/requests/${read.body.requestId}`);
  expect(cancel.status).toBe(409);
  expect(cancel.body).toEqual({
    error: {
      code: "conflict",
      message: `request '${read.body.requestId}' is not started yet; try again in a few seconds`,
    },
  });
  // Once a start after its 202 failed, the edge answers only what it started itself: 503 here.
  // Calls it answered before it knew are accepted too, and delivered the same way.
  const alsoAccepted = [];
  let refused = await post();
  while (refused.status === 202 && alsoAccepted.length < 20) {
    alsoAccepted.push(refused);
    refused = await post();
  }
  expect(refused.status).toBe(503);
  expect(refused.json()).toEqual({
    error: { code: "unavailable", message: "the request could not be queued; try again" },
  });

  for (const call of [accepted, ...alsoAccepted]) {
    expect((await delivered(call)).status).toBe("delivered");
    const ids = sink.received.map((r) => r.headers["x-relay-request-id"]);
    expect(ids.filter((id) => id === call.json().requestId)).toHaveLength(1);
  }

  temporalHttp.restore();
  const again = await post();
  expect(again.status).toBe(202);
  expect((await delivered(again)).status).toBe("delivered");
  expect((await delivered(await post())).status).toBe("delivered");
  await sink.close();
}, 90_000);

test("calls that joined an accepted batch are kept in its start: when the edge cannot make it, the sweep delivers both groups, each call once", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const post = () => relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge });
  const wave = async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, post));
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 202));
    return answers.map((answer) => answer.json().requestId as string);
  };
  // The first goes alone; the other nine as a batch, which waits for the calls behind it.
  const first = await wave();
  temporalHttp.cut();
  const second = await wave();
  const [batch] = await sql<{ requestIds: string[] }[]>`
    select request_ids from accepted_starts
    where project_id = (select id from projects where slug = ${p.slug})
      and workflow_id like 'batch-%'`;
  expect(batch?.requestIds).toEqual(expect.arrayContaining([...first.slice(1), ...second]));

  for (const requestId of [...first, ...second]) {
    expect((await finishedLog(p, requestId, 30_000)).status).toBe("delivered");
  }
  const ids = sink.received.map((r) => r.headers["x-relay-request-id"]);
  expect(ids.sort()).toEqual([...first, ...second].sort());
  temporalHttp.restore();
  // A start of its own succeeds again: the edge accepts before it starts, as before.
  expect((await post()).status).toBe(202);
  await sink.close();
}, 90_000);

test("an acceptance naming a workflow id, a joined one or a confirmation over 256 characters is refused, nothing kept", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const acceptance = {
    project: p.slug,
    calls: [{ requestId: "req_bound", holds: [] }],
    workflowId: "req_bound",
    start: new TextEncoder().encode("{}"),
    started: [] as string[],
  };
  const tooLong = "w".repeat(257);
  for (const bad of [
    { workflowId: tooLong },
    { started: [tooLong] },
    { joinsKeptStart: true, joinedWorkflowId: tooLong },
  ]) {
    await expect(edge.acceptCalls({ ...acceptance, ...bad })).rejects.toMatchObject({
      code: Code.InvalidArgument,
    });
  }
  const read = await api(p.ownerToken, "GET", `${p.base}/requests/req_bound`);
  expect(read.status).toBe(404);
});

test("a lone call's acceptance keeps its holds and its start together, or neither, and forgets the starts it confirms", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  await spendDownTo(sql, p.slug, 3);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const accept = (id: string, credits: number, started: string[] = []) =>
    edge.acceptCalls({
      project: p.slug,
      keyMode: KeyMode.LIVE,
      calls: [{ requestId: id, holds: [{ targetId: "sink", credits: BigInt(credits) }] }],
      workflowId: id,
      start: new TextEncoder().encode("{}"),
      started,
    });
  const ofProject = () => sql`(select id from projects where slug = ${p.slug})`;
  const kept = async () =>
    (
      await sql<{ workflowId: string }[]>`
        select workflow_id from accepted_starts where project_id = ${ofProject()}
        order by workflow_id`
    ).map((row) => row.workflowId);
  const held = async () =>
    (
      await sql<{ requestId: string }[]>`
        select request_id from credit_holds where project_id = ${ofProject()} order by request_id`
    ).map((row) => row.requestId);

  expect(await accept("req_lone_a", 2)).toMatchObject({
    accepted: true,
    refusals: [ReserveRefusal.UNSPECIFIED],
  });
  expect(await accept("req_lone_b", 2)).toMatchObject({
    accepted: false,
    refusals: [ReserveRefusal.INSUFFICIENT_CREDITS],
  });
  expect(await kept()).toEqual(["req_lone_a"]);
  expect(await held()).toEqual(["req_lone_a"]);

  // Its edge confirms a's start in its next acceptance, which fits in what is left.
  expect((await accept("req_lone_c", 1, ["req_lone_a"])).accepted).toBe(true);
  expect(await kept()).toEqual(["req_lone_c"]);
  expect(await held()).toEqual(["req_lone_a", "req_lone_c"]);
});

test("an edge SIGKILLed while calls it accepted wait in an open batch: the sweep delivers them all, each once", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const wave = async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughDoomed }),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 202));
    return answers.map((answer) => answer.json().requestId as string);
  };
  const accepted = [...(await wave()), ...(await wave())];
  // The second wave joined the first's batch, which now waits for a third: not started yet.
  doomedEdge.kill();
  for (const requestId of accepted) {
    expect((await finishedLog(p, requestId, 30_000)).status).toBe("delivered");
  }
  const ids = sink.received.map((r) => r.headers["x-relay-request-id"]);
  expect(ids.sort()).toEqual(accepted.sort());
  await sink.close();
}, 90_000);

test("a group joins a kept start only while it is kept and not near its due time, and only its own project's: else nothing of it is kept", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const other = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const accept = (project: string, ids: string[], joinsKeptStart = false) =>
    edge.acceptCalls({
      project,
      keyMode: KeyMode.LIVE,
      calls: ids.map((requestId) => ({ requestId, holds: [] })),
      workflowId: "batch-req_join_a",
      start: new TextEncoder().encode(ids.join()),
      started: [],
      joinsKeptStart,
    });
  const kept = async () => {
    const [row] = await sql<{ requestIds: string[]; start: Uint8Array }[]>`
      select request_ids, start from accepted_starts where workflow_id = 'batch-req_join_a'`;
    return row && { ids: row.requestIds, start: new TextDecoder().decode(row.start) };
  };

  expect((await accept(p.slug, ["req_join_a", "req_join_b"])).accepted).toBe(true);
  expect((await accept(p.slug, ["req_join_c"], true)).accepted).toBe(true);
  expect(await kept()).toEqual({
    ids: ["req_join_a", "req_join_b", "req_join_c"],
    start: "req_join_c",
  });
  expect((await accept(other.slug, ["req_join_x"], true)).accepted).toBe(false);
  expect((await kept())?.ids).toHaveLength(3);
  // Kept 4 s ago: a sweep may make it in a second.
  await sql`update accepted_starts set accepted_at = now() - interval '4 seconds'
    where workflow_id = 'batch-req_join_a'`;
  expect((await accept(p.slug, ["req_join_d"], true)).accepted).toBe(false);
  expect((await kept())?.ids).toHaveLength(3);
  // Claimed by a sweep, which makes it as it read it: due again only if that start fails.
  await sql`update accepted_starts
    set accepted_at = now() - interval '6 seconds', due_at = now() + interval '5 seconds'
    where workflow_id = 'batch-req_join_a'`;
  expect((await accept(p.slug, ["req_join_d"], true)).accepted).toBe(false);
  expect((await kept())?.ids).toHaveLength(3);
  await sql`delete from accepted_starts where workflow_id = 'batch-req_join_a'`;
  expect((await accept(p.slug, ["req_join_e"], true)).accepted).toBe(false);
  expect(await kept()).toBeUndefined();
});

test("a group joining a lone call's kept start replaces it, workflow id and all: one kept start carries them all", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const accept = (ids: string[], workflowId: string, joined = "") =>
    edge.acceptCalls({
      project: p.slug,
      keyMode: KeyMode.LIVE,
      calls: ids.map((requestId) => ({ requestId, holds: [] })),
      workflowId,
      start: new TextEncoder().encode(ids.join()),
      started: [],
      joinsKeptStart: joined !== "",
      joinedWorkflowId: joined,
    });
  expect((await accept(["req_own_a"], "req_own_a")).accepted).toBe(true);
  const joined = await accept(["req_own_b", "req_own_c"], "batch-req_own_a", "req_own_a");
  expect(joined.accepted).toBe(true);
  const rows = await sql<{ workflowId: string; requestIds: string[] }[]>`
    select workflow_id, request_ids from accepted_starts where 'req_own_a' = any(request_ids)`;
  expect(rows).toEqual([
    { workflowId: "batch-req_own_a", requestIds: ["req_own_a", "req_own_b", "req_own_c"] },
  ]);
  // Nothing is kept under the lone call's id any more: a second join of it finds nothing.
  expect((await accept(["req_own_d"], "batch-req_own_a", "req_own_a")).accepted).toBe(false);
});

test("a burst whose first call goes alone: the calls gathering behind it join its start, and one batch delivers them all, each once", async () => {
  const sink = await targetServer();
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  // The edge learns the project first, so the burst's calls reach its batcher together.
  const first = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge });
  await finishedLog(p, first.json().requestId as string, 30_000);
  sink.received.length = 0;
  const answers = await Promise.all(
    Array.from({ length: 8 }, () =>
      relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge }),
    ),
  );
  expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 202));
  const accepted = answers.map((answer) => answer.json().requestId as string);
  for (const requestId of accepted) {
    expect((await finishedLog(p, requestId, 30_000)).status).toBe("delivered");
  }
  const ids = sink.received.map((r) => r.headers["x-relay-request-id"]);
  expect(ids.sort()).toEqual([...accepted].sort());
  const carriers = await Promise.all(
    accepted.map((requestId) =>
      eventually(async () => (await batchesOf(requestId, BATCH_WORKFLOW))[0]),
    ),
  );
  expect(new Set(carriers).size).toBe(1);
  await sink.close();
}, 60_000);

test("an acceptance whose ordered call's place its edge took meanwhile, for a start of its own, is refused whole: nothing kept to start twice", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const place = (requestId: string) => ({
    project: p.slug,
    laneId: `lane:${p.slug}:${"a".repeat(32)}`,
    requestId,
    targetIds: ["sink"],
  });
  // The edge, its acceptance unanswered in time, joined req_late_b alone.
  expect((await edge.joinLane({ place: place("req_late_b") })).joined).toBe(true);
  await expect(
    edge.acceptCalls({
      project: p.slug,
      keyMode: KeyMode.LIVE,
      calls: ["req_late_a", "req_late_b"].map((requestId) => ({ requestId, holds: [] })),
      workflowId: "batch-req_late_a",
      start: new TextEncoder().encode("{}"),
      started: [],
      lanes: [place("req_late_a"), place("req_late_b")],
    }),
  ).rejects.toMatchObject({ code: Code.AlreadyExists });
  const kept = await sql`select 1 from accepted_starts where workflow_id = 'batch-req_late_a'`;
  const joined = await sql`select 1 from lane_entries where request_id = 'req_late_a'`;
  expect([kept.length, joined.length]).toEqual([0, 0]);
});

test("a sweep claims the projects' due starts in turn: one project's backlog does not hold back another's first", async () => {
  /** Carries what was claimed out of the transaction, which it rolls back. */
  class Claimed extends Error {
    constructor(readonly ids: string[]) {
      super("rolled back");
    }
  }
  const claimed = await sql
    .begin(async (tx) => {
      await tx`delete from accepted_starts`;
      const keep = (id: string, project: string, minutesAgo: number) => tx`
        insert into accepted_starts (workflow_id, project_id, request_ids, start, due_at)
        values (${id}, ${project}, ${[id]}::text[], ${new Uint8Array()},
          now() - make_interval(mins => ${minutesAgo}))`;
      for (let i = 0; i < 10; i++) await keep(`backlog_${i}`, "prj_backlog", 60 - i);
      await keep("quiet_0", "prj_quiet", 5);
      await keep("quiet_1", "prj_quiet", 4);
      await keep("later_0", "prj_later", -1);
      throw new Claimed((await claimDueStarts(tx, 5)).map((start) => start.workflowId));
    })
    .catch((error: unknown) => (error instanceof Claimed ? error.ids : Promise.reject(error)));
  expect(claimed.sort()).toEqual(["backlog_0", "backlog_1", "backlog_2", "quiet_0", "quiet_1"]);
});

test("a kept start Temporal refuses as malformed is forgotten by the sweep, not tried forever", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: "http://127.0.0.1:9/in" }]);
  const edge = memberClient(EdgeService, stack().edgeToken);
  const accepted = await edge.acceptCalls({
    project: p.slug,
    keyMode: KeyMode.LIVE,
    calls: [{ requestId: "req_malformed", holds: [] }],
    workflowId: "req_malformed",
    start: new TextEncoder().encode("{}"),
    started: [],
  });
  expect(accepted.accepted).toBe(true);
  const kept = () =>
    sql`select 1 from accepted_starts where workflow_id = 'req_malformed'`.then(
      (rows) => rows.length,
    );
  expect(await kept()).toBe(1);
  // Its grace (5 s), then the sweep's next round (every 2 s): Temporal answers 400.
  await eventually(async () => (await kept()) === 0, 20_000);
});
