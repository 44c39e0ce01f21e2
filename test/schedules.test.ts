/**
 * Schedules (docs/api.md "Schedules") on the real stack: a schedule's fire is a call through the
 * edge's whole pipeline (its body and headers to the targets, the log, credits, a sync target's
 * own answer), made by Temporal's Schedule on its cron or by a trigger; a paused one does not fire
 * and a deleted one leaves Temporal too. Bad crons, time zones, headers and bodies, a plan's bounds
 * and a forged fire token are refused.
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { ScheduleNotFoundError } from "@temporalio/client";
import { afterAll, expect, test } from "vitest";
import { KeyMode } from "../gen/relay/v1/keys_pb.ts";
import { ScheduleService } from "../gen/relay/v1/schedules_pb.ts";
import {
  api,
  eventually,
  finishedLog,
  memberClient,
  projectWithEndpoint,
  relay,
  relayTemporal,
  targetServer,
} from "./helpers.ts";

interface Schedule {
  scheduleId: string;
  endpoint: string;
  paused: boolean;
  fires: number;
  lastStatus: number | null;
  lastRequestId: string | null;
  nextFireAt: string | null;
}

type Project = Awaited<ReturnType<typeof projectWithEndpoint>>;

const closers: (() => Promise<void>)[] = [];
afterAll(() => Promise.all(closers.map((close) => close())));

async function target(status = 200) {
  const server = await targetServer(() => ({ status }));
  closers.push(server.close);
  return server;
}

const create = (p: Project, body: unknown) =>
  api<Schedule>(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/hook/schedules`, body);
const read = async (p: Project, id: string) =>
  (await api<Schedule>(p.ownerToken, "GET", `${p.base}/schedules/${id}`)).body;
const trigger = (p: Project, id: string) =>
  api<Schedule>(p.ownerToken, "POST", `${p.base}/schedules/${id}/trigger`);
const usedCredits = async (p: Project) =>
  (await api<{ pools: { live: { used: number } } }>(p.ownerToken, "GET", `${p.base}/usage`)).body
    .pools.live.used;

// Made first and read last: its cron fires at the next minute while the other tests run.
let everyMinute: { p: Project; scheduleId: string; received: { body: string }[] } | undefined;

test("a fire is a call through the pipeline: its body, headers, log, credits; an allowlist does not hold it back", async () => {
  const server = await target();
  // Callers from loopback are refused by the allowlist; a fire is Relay's own call.
  const p = await projectWithEndpoint([{ name: "a", targetUrl: server.url }], {
    ipAllowlist: ["203.0.113.0/24"],
  });
  expect((await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).status).toBe(403);
  const made = await create(p, {
    cron: "* * * * *",
    timeZone: "Europe/Paris",
    body: { report: "daily" },
    headers: { "x-source": "cron" },
    note: "the daily report",
  });
  expect(made.status).toBe(201);
  const { scheduleId } = made.body;
  expect(made.body).toMatchObject({ endpoint: "v1/hook", fires: 0, paused: false });
  expect(Date.parse(made.body.nextFireAt ?? "")).toBeGreaterThan(Date.now() - 1000);
  everyMinute = { p, scheduleId, received: server.received };
  const listed = await api<{ schedules: Schedule[] }>(p.ownerToken, "GET", `${p.base}/schedules`);
  expect(listed.body.schedules.map((s) => s.scheduleId)).toEqual([scheduleId]);
  // A list leaves the calls' bodies and headers out: each may be 64 KiB.
  expect(listed.body.schedules[0]).not.toHaveProperty("body");

  const before = await usedCredits(p);
  expect((await trigger(p, scheduleId)).status).toBe(202);
  const fired = await eventually(async () => {
    const s = await read(p, scheduleId);
    return s.fires >= 1 && s;
  });
  expect(fired.lastStatus).toBe(202);
  const log = await finishedLog(p, fired.lastRequestId ?? "");
  expect(log.status).toBe("delivered");
  const [received] = server.received;
  expect(JSON.parse(received?.body ?? "")).toEqual({ report: "daily" });
  expect(received?.headers).toMatchObject({ "x-source": "cron", "relay-schedule-id": scheduleId });
  expect(received?.headers.authorization).toBeUndefined();
  expect(await usedCredits(p)).toBe(before + 1);
});

test("a fire to a sync target records the target's own answer", async () => {
  const server = await target(201);
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: server.url, deliveryMode: "sync" },
  ]);
  const { scheduleId } = (await create(p, { cron: "0 9 * * 1-5", body: { n: 1 } })).body;
  await trigger(p, scheduleId);
  const fired = await eventually(async () => {
    const s = await read(p, scheduleId);
    return s.fires >= 1 && s;
  });
  expect(fired.lastStatus).toBe(201);
  expect(server.received).toHaveLength(1);
});

test("a paused schedule plans no fire; a deleted one, or one whose endpoint is deleted, leaves Temporal too", async () => {
  const p = await projectWithEndpoint([{ name: "a", targetUrl: (await target()).url }]);
  const { scheduleId } = (await create(p, { cron: "@hourly" })).body;
  const paused = await api<Schedule>(p.ownerToken, "PATCH", `${p.base}/schedules/${scheduleId}`, {
    paused: true,
    cron: "30 * * * *",
  });
  expect(paused.body).toMatchObject({ paused: true, nextFireAt: null });
  const temporal = await relayTemporal();
  const described = await temporal.schedule.getHandle(scheduleId).describe();
  expect(described.state.paused).toBe(true);
  expect(described.spec.calendars?.[0]?.minute).toEqual([{ start: 30, end: 30, step: 1 }]);
  const resumed = await api<Schedule>(p.ownerToken, "PATCH", `${p.base}/schedules/${scheduleId}`, {
    paused: false,
  });
  expect(new Date(resumed.body.nextFireAt ?? 0).getUTCMinutes()).toBe(30);

  expect((await api(p.ownerToken, "DELETE", `${p.base}/schedules/${scheduleId}`)).status).toBe(204);
  expect((await api(p.ownerToken, "GET", `${p.base}/schedules/${scheduleId}`)).status).toBe(404);
  await expect(temporal.schedule.getHandle(scheduleId).describe()).rejects.toBeInstanceOf(
    ScheduleNotFoundError,
  );
  // Deleting the endpoint takes its schedules along, in Temporal too.
  const kept = (await create(p, { cron: "@daily" })).body.scheduleId;
  await api(p.ownerToken, "DELETE", `${p.base}/lines/v1/endpoints/hook`);
  await expect(temporal.schedule.getHandle(kept).describe()).rejects.toBeInstanceOf(
    ScheduleNotFoundError,
  );
  expect((await api(p.ownerToken, "GET", `${p.base}/schedules/${kept}`)).status).toBe(404);
  await temporal.connection.close();
});

test("bad schedules get a 400 naming the field; a plan's bounds hold", async () => {
  const p = await projectWithEndpoint([{ name: "a", targetUrl: (await target()).url }], {}, "free");
  const refused = async (body: unknown, path: string, message: string) => {
    const answer = await create(p, body);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({
      error: {
        code: "bad_request",
        details: [{ path, message: expect.stringContaining(message) }],
      },
    });
  };
  await refused({ cron: "* * *" }, "cron", "five fields");
  await refused({ cron: "*/2 * * * *" }, "cron", "at least 5 minute(s) apart");
  await refused({ cron: "0 * * * * 2027" }, "cron", "five fields");
  await refused({ cron: "0 * * * *", timeZone: "Mars/Olympus" }, "timeZone", "IANA");
  await refused({ cron: "0 * * * *", headers: { Authorization: "x" } }, "headers", "Authorization");
  // A fire could never send these: each would fail until the schedule is changed.
  await refused({ cron: "0 * * * *", headers: { "x-a": "\u{1F600}" } }, "headers.x-a", "U+00FF");
  await refused({ cron: "__proto__" }, "cron", "five fields");
  await refused({ cron: "0 * * * *", body: "x".repeat(70_000) }, "body", "64 KiB");
  await refused({ cron: "0 * * * *", every: "1m" }, "", "every");
  await refused({ cron: "0 * * * *", note: "a\u0000b" }, "note", "control characters");
  const longName = await create(p, { cron: "0 * * * *", headers: { ["x".repeat(300)]: "v" } });
  expect(longName.status).toBe(400);
  const missing = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/nope/schedules`, {
    cron: "0 * * * *",
  });
  expect(missing.status).toBe(404);
  // A stream answers the caller reading it; a fire has none.
  await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints`, {
    path: "live",
    targets: [{ name: "s", targetUrl: "http://127.0.0.1:9/in", deliveryMode: "stream" }],
  });
  const streamed = await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/live/schedules`, {
    cron: "0 * * * *",
  });
  expect(streamed.status).toBe(409);
  expect(streamed.body).toMatchObject({ error: { code: "conflict" } });

  for (let i = 0; i < 10; i++) expect((await create(p, { cron: "*/5 * * * *" })).status).toBe(201);
  const eleventh = await create(p, { cron: "*/5 * * * *" });
  expect(eleventh.status).toBe(409);
  expect(eleventh.body).toMatchObject({ error: { code: "limit_exceeded" } });

  // Another project's schedule is not there to read, change or fire.
  const other = await projectWithEndpoint([{ name: "a", targetUrl: (await target()).url }]);
  const { scheduleId } = (await create(other, { cron: "0 * * * *" })).body;
  expect((await api(p.ownerToken, "GET", `${p.base}/schedules/${scheduleId}`)).status).toBe(404);
  expect((await trigger(p, scheduleId)).status).toBe(404);
});

test("over Connect, a schedule is made, read, changed and fired as over REST", async () => {
  const server = await target();
  const p = await projectWithEndpoint([{ name: "a", targetUrl: server.url }]);
  const client = memberClient(ScheduleService, p.ownerToken);
  const { schedule } = await client.createSchedule({
    project: p.slug,
    line: "v1",
    path: "hook",
    spec: { cron: "0 0 1 1 *", body: fromJson(ValueSchema, { via: "connect" }) },
  });
  const scheduleId = schedule?.scheduleId ?? "";
  expect(schedule).toMatchObject({ endpoint: "v1/hook", timeZone: "UTC", mode: KeyMode.LIVE });
  const changed = await client.updateSchedule({
    project: p.slug,
    scheduleId,
    spec: { headers: { values: { "x-via": "connect" } }, note: "yearly" },
  });
  expect(changed.schedule).toMatchObject({ note: "yearly", headers: { "x-via": "connect" } });
  await client.triggerSchedule({ project: p.slug, scheduleId });
  await eventually(async () => server.received.length === 1);
  expect(JSON.parse(server.received[0]?.body ?? "")).toEqual({ via: "connect" });
  const { schedules } = await client.listSchedules({ project: p.slug, line: "v1", path: "hook" });
  expect(schedules.map((s) => s.scheduleId)).toEqual([scheduleId]);
  await expect(
    client.createSchedule({ project: p.slug, line: "v1", path: "hook", spec: { cron: "bad" } }),
  ).rejects.toMatchObject({ code: Code.InvalidArgument });
  await client.deleteSchedule({ project: p.slug, scheduleId });
});

test("a forged or replayed fire token is a wrong key", async () => {
  const p = await projectWithEndpoint([{ name: "a", targetUrl: (await target()).url }]);
  const forged = await relay(p.slug, "/v1/hook", {
    body: "{}",
    headers: {
      authorization: `Relay-Fire sch_AAAAAAAAAAAAAAAAAAAAAA.live.${Date.now()}.${"A".repeat(43)}`,
      "idempotency-key": "sch_AAAAAAAAAAAAAAAAAAAAAA-2026-12-04T12:00:00Z",
    },
  });
  expect(forged.status).toBe(401);
  expect(forged.json()).toMatchObject({ error: { code: "invalid_or_missing_key" } });
});

test("a schedule fires on its cron", async () => {
  if (!everyMinute) throw new Error("the first test made no schedule");
  const { p, scheduleId, received } = everyMinute;
  // The trigger's fire, then the cron's at the next minute.
  const fired = await eventually(async () => {
    const s = await read(p, scheduleId);
    return s.fires >= 2 && s;
  }, 70_000);
  expect(fired.lastStatus).toBe(202);
  await eventually(async () => received.length >= 2, 10_000);
}, 90_000);
