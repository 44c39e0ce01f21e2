/**
 * Recovery jobs (docs/api.md "Recovery jobs") on the real stack: a dry run says what a replay by
 * filter would send and cost; the job replays in the background through the control plane's
 * worker, keeps each target's flow control, shows its progress at least every 2 s, stops within
 * a second of its cancel, and charges only what it delivered. Bad filters are refused.
 */
import { createServer } from "node:http";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { afterAll, expect, test } from "vitest";
import { RecoveryService, RecoveryState } from "../gen/relay/v1/recoveries_pb.ts";
import { connect } from "../store/db.ts";
import { pruneRequestLog } from "../store/retention.ts";
import {
  api,
  eventually,
  grantCredits,
  memberClient,
  newProject,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;
interface Job {
  recoveryId: string;
  state: string;
  matched: number;
  sent: number;
  failed: number;
  skipped: number;
  running: number;
  updatedAt: string;
  finishedAt: string | null;
}

const sql = connect(stack().databaseUrl, { max: 2 });
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await sql.end();
});

/** A target that refuses with 400 until healed. */
async function healable() {
  const state = { healed: false };
  const server = await targetServer(() => ({ status: state.healed ? 200 : 400 }));
  closers.push(server.close);
  return { ...server, heal: () => (state.healed = true) };
}

/** `count` calls, 32 at a time (each sent again when rate limited); their request ids. */
async function calls(p: Project, count: number): Promise<string[]> {
  const ids: string[] = [];
  const call = async (): Promise<string> => {
    const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" });
    if (answer.status !== 429) {
      expect(answer.status).toBe(202);
      return answer.json().requestId;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
    return call();
  };
  let left = count;
  const next = async (): Promise<void> => {
    while (left-- > 0) ids.push(await call());
  };
  await Promise.all(Array.from({ length: 32 }, next));
  return ids;
}

const inStatus = async (p: Project, status: string) => {
  const [row] = await sql<{ count: number }[]>`
    select count(*)::int from requests r join projects p on p.id = r.project_id
    where p.slug = ${p.slug} and r.status = ${status}`;
  return row?.count ?? 0;
};

const usedCredits = async (p: Project) =>
  (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
    .pools.live.used;

const job = async (p: Project, id: string) =>
  (await api<Job>(p.ownerToken, "GET", `${p.base}/recoveries/${id}`)).body;

const ended = (p: Project, id: string, timeoutMs = 60_000) =>
  eventually(async () => {
    const read = await job(p, id);
    return read.finishedAt !== null && read;
  }, timeoutMs);

test("a job of 2,000 failures to a target limited to 20/s keeps the pace, shows its progress, stops when cancelled and charges only what it sent", async () => {
  const sink = await healable();
  const p = await projectWithEndpoint([{ name: "slow", targetUrl: sink.url }]);
  await grantCredits(p.slug, 10_000);
  await calls(p, 2000);
  await eventually(async () => (await inStatus(p, "failed")) === 2000, 120_000);
  sink.heal();
  const limited = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: [{ name: "slow", targetUrl: sink.url, maxDeliveriesPerSecond: 20 }],
  });
  expect(limited.status).toBe(200);

  const plan = await api(p.ownerToken, "POST", `${p.base}/recoveries`, {
    endpoint: "v1/hook",
    dryRun: true,
  });
  expect(plan.status).toBe(200);
  expect(plan.body).toEqual({ matched: 2000, credits: 2000 });
  expect(sink.received).toHaveLength(2000);

  const usedBefore = await usedCredits(p);
  const started = await api<Job>(p.ownerToken, "POST", `${p.base}/recoveries`, {
    endpoint: "v1/hook",
  });
  expect(started.status).toBe(202);
  expect(started.body).toMatchObject({ state: "running", matched: 2000, sent: 0 });
  const { recoveryId } = started.body;

  // Its progress, read every 250 ms until 40 were sent: growing, and never 2 s behind what the
  // target got.
  const sentSoFar: number[] = [];
  await eventually(async () => {
    const { sent } = await job(p, recoveryId);
    const gotBefore = sink.received.slice(2000).filter((r) => r.at < Date.now() - 2000);
    expect(sent).toBeGreaterThanOrEqual(gotBefore.length);
    sentSoFar.push(sent);
    await new Promise((resolve) => setTimeout(resolve, 150));
    return sent >= 40;
  });
  expect(new Set(sentSoFar).size).toBeGreaterThan(5);
  expect(sentSoFar).toEqual([...sentSoFar].sort((a, b) => a - b));

  const cancelled = await api<Job>(p.ownerToken, "DELETE", `${p.base}/recoveries/${recoveryId}`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.state).toBe("cancelled");
  const cancelledAt = Date.now();
  const last = await ended(p, recoveryId);
  expect(last).toMatchObject({ state: "cancelled", running: 0, skipped: 0 });
  expect(last.sent).toBeGreaterThan(0);
  expect(last.sent).toBeLessThan(2000);

  const replays = sink.received.slice(2000);
  // Nothing reached the target a second after the cancel, and what did reach it is what it sent.
  expect(replays.filter((r) => r.at > cancelledAt + 1000)).toEqual([]);
  expect(replays).toHaveLength(last.sent);
  expect((await usedCredits(p)) - usedBefore).toBe(last.sent);
  // The target's limit held throughout: no second with more than 20 replays' attempts begun
  // (as the worker began them: the sink's own clock runs in this busy test process).
  const begun = await sql<{ startedAt: Date }[]>`
    select a.started_at from attempts a join requests r on r.id = a.request_id
    join projects p on p.id = r.project_id where p.slug = ${p.slug} and a.replay > 0
    order by a.started_at`;
  expect(begun.length).toBeGreaterThanOrEqual(last.sent);
  const times = begun.map((a) => a.startedAt.getTime());
  for (const [i, first] of times.entries()) {
    expect(times.slice(i).filter((at) => at < first + 1000).length).toBeLessThanOrEqual(20);
  }
  // The rest stay in the failure queue.
  expect(await inStatus(p, "failed")).toBe(2000 - last.sent - last.failed);
}, 300_000);

test("a job for one target replays what it did not get, to it alone, to the end", async () => {
  const broken = await healable();
  const fine = await targetServer();
  closers.push(fine.close);
  const p = await projectWithEndpoint([
    { name: "broken", targetUrl: broken.url },
    { name: "fine", targetUrl: fine.url },
  ]);
  await calls(p, 5);
  await eventually(async () => (await inStatus(p, "partially_failed")) === 5);
  broken.heal();
  const log = await api<{ requests: { attempts: { targetId: string; targetName: string }[] }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests`,
  );
  const brokenId = log.body.requests[0]?.attempts.find((a) => a.targetName === "broken")?.targetId;

  const plan = await api(p.ownerToken, "POST", `${p.base}/recoveries`, {
    target: brokenId,
    dryRun: true,
  });
  expect(plan.body).toEqual({ matched: 5, credits: 5 });
  const started = await api<Job>(p.ownerToken, "POST", `${p.base}/recoveries`, {
    target: brokenId,
  });
  expect(started.status).toBe(202);
  const done = await ended(p, started.body.recoveryId);
  expect(done).toMatchObject({ state: "completed", matched: 5, sent: 5, failed: 0, skipped: 0 });
  expect(broken.received).toHaveLength(10);
  expect(fine.received).toHaveLength(5);
  expect(await inStatus(p, "delivered")).toBe(5);
  // Nothing is left to match: a second job completes with none.
  const again = await api<Job>(p.ownerToken, "POST", `${p.base}/recoveries`, { target: brokenId });
  expect(await ended(p, again.body.recoveryId)).toMatchObject({ state: "completed", matched: 0 });
  const list = await api<{ recoveries: Job[] }>(p.ownerToken, "GET", `${p.base}/recoveries`);
  expect(list.body.recoveries.map((r) => r.recoveryId)).toEqual([
    again.body.recoveryId,
    started.body.recoveryId,
  ]);
  // The same over Connect; a reversed time range matches nothing.
  const connect = memberClient(RecoveryService, p.ownerToken);
  const read = await connect.getRecovery({ project: p.slug, recoveryId: started.body.recoveryId });
  expect(read.recovery).toMatchObject({
    state: RecoveryState.COMPLETED,
    sent: 5,
    target: brokenId,
  });
  const reversed = await connect.startRecovery({
    project: p.slug,
    filter: { since: timestampFromDate(new Date()), until: timestampFromDate(new Date(0)) },
    dryRun: true,
  });
  expect(reversed.result).toEqual({
    case: "plan",
    value: expect.objectContaining({ matched: 0, credits: 0n }),
  });
  // A job that ended longer ago than the log's retention leaves with the daily run.
  await sql`update recoveries set finished_at = now() - interval '31 days' where id = ${again.body.recoveryId}`;
  expect((await pruneRequestLog(sql, new Date(), 30 * 86_400_000)).recoveries).toBe(1);
  expect(
    (await api(p.ownerToken, "GET", `${p.base}/recoveries/${again.body.recoveryId}`)).status,
  ).toBe(404);
});

test("a project runs at most 3 jobs at once; bad filters, unknown jobs and other projects' are refused", async () => {
  // A target that answers after 4 s once healed: each job's one replay keeps it running.
  let healed = false;
  const slow = createServer((req, res) => {
    req.resume();
    setTimeout(() => res.writeHead(healed ? 200 : 400).end(), healed ? 4000 : 0);
  });
  await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => slow.close(() => resolve())));
  const { port } = slow.address() as { port: number };
  const p = await projectWithEndpoint([{ name: "slow", targetUrl: `http://127.0.0.1:${port}/` }]);
  const ids = await calls(p, 4);
  await eventually(async () => (await inStatus(p, "failed")) === 4);
  healed = true;
  const start = (body: Record<string, unknown>) =>
    api<Job>(p.ownerToken, "POST", `${p.base}/recoveries`, body);
  const jobs = [];
  for (const requestId of ids.slice(0, 3)) jobs.push(await start({ requestId }));
  expect(jobs.map((j) => j.status)).toEqual([202, 202, 202]);
  const fourth = await start({ requestId: ids[3] });
  expect(fourth.status).toBe(409);
  expect(fourth.body).toMatchObject({ error: { code: "limit_exceeded" } });
  // Cancelled, a job no longer counts; cancelled again, it answers as it stands.
  const [first] = jobs;
  const cancel = () =>
    api<Job>(p.ownerToken, "DELETE", `${p.base}/recoveries/${first?.body.recoveryId}`);
  expect((await cancel()).body.state).toBe("cancelled");
  expect((await cancel()).status).toBe(200);
  expect((await start({ requestId: ids[3] })).status).toBe(202);
  const completed = await ended(p, jobs[1]?.body.recoveryId ?? "");
  expect(completed.state).toBe("completed");
  const late = await api(p.ownerToken, "DELETE", `${p.base}/recoveries/${completed.recoveryId}`);
  expect([late.status, late.body.state]).toEqual([200, "completed"]);
  // A project keeps at most 1,000 jobs, ended ones included, until they age out.
  await sql`
    insert into recoveries (id, project_id, filter, state, matched, credits, finished_at)
    select 'rec_kept_' || n || ${p.slug}, project_id, filter, 'completed', 0, 0, now()
    from recoveries, generate_series(1, 1000) n where id = ${completed.recoveryId}`;
  const past = await start({ requestId: ids[3] });
  expect(past.status).toBe(409);
  expect(past.body).toMatchObject({ error: { code: "limit_exceeded" } });

  const refused = [
    [{ status: "queued" }, 400],
    [{ since: "yesterday" }, 400],
    [{ dryRun: "yes" }, 400],
    [{ colour: "red" }, 400],
    [{ target: "tgt_\u0000" }, 400],
    [{ target: "tgt_nope" }, 404],
  ] as const;
  for (const [body, status] of refused) {
    const answer = await start(body);
    expect(answer.status, JSON.stringify(body)).toBe(status);
    expect(answer.body).toHaveProperty("error.code");
  }
  expect((await api(p.ownerToken, "GET", `${p.base}/recoveries/rec_nope`)).status).toBe(404);
  const other = await newProject();
  const foreign = await api(
    other.ownerToken,
    "GET",
    `/projects/${other.slug}/recoveries/${completed.recoveryId}`,
  );
  expect(foreign.status).toBe(404);
}, 120_000);
