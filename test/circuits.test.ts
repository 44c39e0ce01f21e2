/**
 * Circuit breakers, pauses and notifications against the real stack: a target failing N times in
 * a row opens its circuit, after which only probes reach it; recovery drains the held deliveries,
 * none lost and none delivered under two delivery ids; a disabled target, enabled again, gets its
 * held deliveries; a paused one too once resumed. Each transition is told to the project's
 * notification URL, signed.
 */
import { afterAll, expect, test } from "vitest";
import { circuitWorkflowId } from "../core/temporal.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type Received,
  relay,
  relayTemporal,
  stack,
  targetServer,
  verifiesSignature,
} from "./helpers.ts";

type Circuit = { targetName: string; state: string; paused: boolean; waiting: number };
type Circuits = { targets: Circuit[] };

const sql = connect(stack().databaseUrl, { max: 1 });
const closers: (() => Promise<void>)[] = [() => sql.end()];
afterAll(() => Promise.all(closers.map((close) => close())));

/** A target that answers 503 while `down`. */
async function switchable() {
  const state = { down: true };
  const server = await targetServer(() => ({ status: state.down ? 503 : 200 }));
  closers.push(server.close);
  return Object.assign(server, { state });
}

/** A project whose endpoint has one async target `t`, and its notifications going to a receiver. */
async function setup(
  targetUrl: string,
  circuitBreaker: Record<string, number>,
  others: { name: string; targetUrl: string }[] = [],
) {
  const notifications = await targetServer();
  closers.push(notifications.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl }, ...others], { circuitBreaker });
  const set = await api<{ secret: string }>(p.ownerToken, "PUT", `${p.base}/notifications`, {
    url: notifications.url,
  });
  expect(set.status).toBe(200);
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  const circuit = async () =>
    (await api<Circuits>(p.ownerToken, "GET", `${endpoint}/circuits`)).body.targets[0] as Circuit;
  return { ...p, endpoint, circuit, notifications, secret: set.body.secret };
}

const send = async (p: { slug: string; key: string }, n: number) =>
  (await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${n}}` })).json().requestId as string;

/** The notification of `type`, once it arrived. */
async function notified(notifications: { received: Received[] }, type: string) {
  return eventually(
    async () => notifications.received.find((r) => JSON.parse(r.body).type === type),
    60_000,
  );
}

test("a failing target opens its circuit, only probes reach it, and recovery drains every held delivery once", async () => {
  const target = await switchable();
  const fine = await targetServer();
  closers.push(fine.close);
  const p = await setup(target.url, { failureThreshold: 3, windowSeconds: 60 }, [
    { name: "fine", targetUrl: fine.url },
  ]);

  const first = [await send(p, 1), await send(p, 2), await send(p, 3)];
  await eventually(async () => (await p.circuit()).state === "open");
  const opened = await notified(p.notifications, "target.circuit_opened");
  expect(await verifiesSignature(p.secret, opened)).toBe(true);
  expect(JSON.parse(opened.body).data).toMatchObject({
    project: p.slug,
    line: "v1",
    endpoint: "hook",
    target: { name: "t" },
  });

  const held: string[] = [];
  for (let n = 4; n <= 8; n++) held.push(await send(p, n));
  await eventually(async () => (await p.circuit()).waiting === 8);
  const log = await api<{ status: string; attempts: unknown[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests/${held[0]}`,
  );
  expect(log.body).toMatchObject({
    status: "delivering",
    attempts: [{ targetName: "fine", statusCode: 200 }],
    waiting: [{ targetName: "t", reason: "circuit_open" }],
  });
  // Open: the three first attempts, then one probe (5 s after opening), failing; the next
  // comes 10 s after it. The held deliveries' retries make no attempt.
  await new Promise((resolve) => setTimeout(resolve, 8000));
  const whileOpen = target.received.length;
  expect(whileOpen).toBe(4);
  const history = await api<{ targets: { events: { event: string }[] }[] }>(
    p.ownerToken,
    "GET",
    `${p.endpoint}/circuits`,
  );
  expect(history.body.targets[0]?.events.map((e) => e.event)).toEqual(["probe_failed", "opened"]);
  // The endpoint's other target is not held: it had every request at once.
  expect(fine.received.map((r) => JSON.parse(r.body).n).sort()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  expect(history.body.targets[1]).toMatchObject({
    targetName: "fine",
    state: "closed",
    waiting: 0,
  });

  target.state.down = false;
  for (const id of [...first, ...held]) await finishedLog(p, id, 90_000);
  const recovered = await notified(p.notifications, "target.recovered");
  expect(await verifiesSignature(p.secret, recovered)).toBe(true);
  expect((await p.circuit()).state).toBe("closed");

  const delivered = target.received.slice(whileOpen);
  const bodies = delivered.map((r) => JSON.parse(r.body).n as number).sort((a, b) => a - b);
  expect(bodies).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  const idsByRequest = new Map<string, Set<string>>();
  for (const r of target.received) {
    const request = r.headers["x-relay-request-id"] as string;
    const ids = idsByRequest.get(request) ?? new Set();
    ids.add(r.headers["x-relay-delivery-id"] as string);
    idsByRequest.set(request, ids);
  }
  expect([...idsByRequest.values()].every((ids) => ids.size === 1)).toBe(true);
}, 150_000);

test("a circuit open too long disables its target; enabled again, its held deliveries arrive", async () => {
  const target = await switchable();
  const p = await setup(target.url, { failureThreshold: 1, disableAfterSeconds: 5 });
  const ids = [await send(p, 1)];
  await eventually(async () => (await p.circuit()).state === "open");
  ids.push(await send(p, 2));
  const disabled = await notified(p.notifications, "target.disabled");
  expect(await verifiesSignature(p.secret, disabled)).toBe(true);
  expect((await p.circuit()).state).toBe("disabled");

  target.state.down = false;
  const tried = target.received.length;
  await new Promise((resolve) => setTimeout(resolve, 2000));
  expect(target.received.length).toBe(tried); // disabled: no probe

  const enabled = await api<Circuits>(p.ownerToken, "POST", `${p.endpoint}/targets/t/enable`);
  expect(enabled.status).toBe(200);
  expect(enabled.body.targets[0]?.state).toBe("closed");
  for (const id of ids) {
    const log = await finishedLog<{ status: string }>(p, id, 60_000);
    expect(log.status).toBe("delivered");
  }
}, 120_000);

test("a paused target holds its deliveries without attempts until resumed", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const p = await setup(target.url, {});
  const paused = await api<Circuits>(p.ownerToken, "POST", `${p.endpoint}/targets/t/pause`);
  expect(paused.body.targets[0]).toMatchObject({ paused: true, state: "closed" });

  const ids = [await send(p, 1), await send(p, 2)];
  await eventually(async () => (await p.circuit()).waiting === 2);
  expect(target.received).toEqual([]);
  const log = await api(p.ownerToken, "GET", `${p.base}/requests/${ids[0]}`);
  expect(log.body.waiting).toEqual([
    { targetId: expect.any(String), targetName: "t", reason: "paused" },
  ]);

  const resumed = await api<Circuits>(p.ownerToken, "POST", `${p.endpoint}/targets/t/resume`);
  expect(resumed.body.targets[0]?.paused).toBe(false);
  for (const id of ids) await finishedLog(p, id, 60_000);
  expect(target.received.map((r) => JSON.parse(r.body).n).sort()).toEqual([1, 2]);

  // A whole endpoint pauses the same way; an unknown target is a 404.
  const endpointPaused = await api<Circuits>(p.ownerToken, "POST", `${p.endpoint}/pause`);
  expect(endpointPaused.body.targets[0]).toMatchObject({ paused: false, endpointPaused: true });
  const unknown = await api(p.ownerToken, "POST", `${p.endpoint}/targets/nope/pause`);
  expect(unknown.status).toBe(404);
  // A request cancelled while it waits waits no more.
  const cancelled = await send(p, 0);
  await eventually(async () => (await p.circuit()).waiting === 1);
  expect((await api(p.ownerToken, "DELETE", `${p.base}/requests/${cancelled}`)).body.status).toBe(
    "cancelled",
  );
  expect((await p.circuit()).waiting).toBe(0);
  const third = await send(p, 3);
  await eventually(async () => (await p.circuit()).waiting === 1);
  await api(p.ownerToken, "POST", `${p.endpoint}/resume`);
  await finishedLog(p, third, 60_000);
  expect(target.received).toHaveLength(3);

  // A deleted endpoint's targets leave no circuit behind.
  const { targetId } = (await p.circuit()) as Circuit & { targetId: string };
  const rows = async () =>
    (
      await sql`select 1 from target_circuits where target_id = ${targetId}
      union all select 1 from circuit_events where target_id = ${targetId}`
    ).length;
  expect(await rows()).toBeGreaterThan(0);
  expect((await api(p.ownerToken, "DELETE", p.endpoint)).status).toBe(204);
  expect(await rows()).toBe(0);
}, 120_000);

test("a delivery waiting on an open circuit whose workflow is gone starts it again", async () => {
  const target = await switchable();
  const p = await setup(target.url, { failureThreshold: 1 });
  await send(p, 1);
  await eventually(async () => (await p.circuit()).state === "open");
  // An operator terminates the circuit's workflow in the Temporal UI.
  const { targetId } = (await p.circuit()) as Circuit & { targetId: string };
  const temporal = await relayTemporal();
  closers.push(() => temporal.connection.close());
  await temporal.workflow.getHandle(circuitWorkflowId(targetId)).terminate("test");

  target.state.down = false;
  const held = await send(p, 2);
  const log = await finishedLog<{ status: string }>(p, held, 60_000);
  expect(log.status).toBe("delivered");
  expect((await p.circuit()).state).toBe("closed");
}, 90_000);

test("a request that fails is told to the project, signed", async () => {
  const refusing = await targetServer(() => ({ status: 404 }));
  closers.push(refusing.close);
  const p = await setup(refusing.url, {});
  const id = await send(p, 1);
  expect((await finishedLog<{ status: string }>(p, id)).status).toBe("failed");
  const failed = await notified(p.notifications, "request.failed");
  expect(await verifiesSignature(p.secret, failed)).toBe(true);
  expect(JSON.parse(failed.body).data).toMatchObject({ requestId: id, status: "failed" });
});
