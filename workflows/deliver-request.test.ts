/**
 * deliverRequest alone, on mocked activities (test/workflow-worker.ts): which targets it tries,
 * how long it waits between attempts and for a delayed call's time, how a cancel stops it, and
 * what status results. The stack's tests cover the activities' I/O.
 *
 * `RECORD_HISTORIES=1 npx vitest run workflows/deliver-request.test.ts workflows/workflows.test.ts`
 * also writes the runs that name a history to workflows/histories/, which replay.test.ts replays
 * on every later change.
 */
import { expect, test } from "vitest";
import type { DeliveryInput } from "../core/delivery.ts";
import type { DeliveryTarget } from "../core/model.ts";
import {
  type Attempt,
  attemptsOf,
  busyTimes,
  callsOf,
  delivery,
  env,
  recordHistory,
  relayStatus,
  script,
  start,
  target,
  taskQueue,
  timers,
  withMockedWorker,
} from "../test/workflow-worker.ts";
import type { Activities } from "./activities.ts";
import type { DeliverInput, RequestRow } from "./deliveries.ts";
import type { deliverRequest, sendCallback } from "./workflows.ts";

withMockedWorker();

test("deliverRequest retries by the backoff each attempt names, until delivered", async () => {
  const flaky = target("flaky");
  script.set(flaky.id, [
    { status: 503 },
    { status: 503 },
    { error: "ECONNRESET" },
    { status: 200 },
  ]);
  const handle = await start(delivery([flaky]));

  expect(await handle.result()).toBe("delivered");
  const tried = attemptsOf(handle.workflowId);
  expect(tried.map((a) => [a.via, a.temporalAttempt, a.delayMs])).toEqual([
    ["firstAttempt", undefined, 200],
    ["deliver", 1, 400],
    ["deliver", 2, 800],
    ["deliver", 3, undefined],
  ]);
  // The first retry waits on a workflow timer; later ones on the activity's retry.
  expect(await timers(handle)).toEqual([200]);
  for (const [i, a] of tried.slice(1).entries()) {
    const before = tried[i] as Attempt;
    expect(a.at - before.at).toBeGreaterThanOrEqual(before.delayMs as number);
  }
  expect(await relayStatus(handle)).toBe("delivered");
});

test("deliverRequest waits a longer Retry-After, on the first attempt and on later ones", async () => {
  const busy = target("busy");
  script.set(busy.id, [
    { status: 429, retryAfter: "1" },
    { status: 503, retryAfter: "1" },
    { status: 200 },
  ]);
  const handle = await start(delivery([busy]));

  expect(await handle.result()).toBe("delivered");
  const tried = attemptsOf(handle.workflowId);
  // The backoff alone would wait 200 ms, then 400 ms.
  expect(tried.map((a) => a.delayMs)).toEqual([1000, 1000, undefined]);
  expect(await timers(handle)).toEqual([1000]);
  const [first, second, third] = tried as [Attempt, Attempt, Attempt];
  expect(second.at - first.at).toBeGreaterThanOrEqual(1000);
  expect(third.at - second.at).toBeGreaterThanOrEqual(1000);
  await recordHistory(handle, "retried-after-retry-after");
});

test("deliverRequest settles a request with one target delivered and one failed as partially failed", async () => {
  const fine = target("fine");
  const broken = target("broken");
  const caller = target("caller", "sync");
  script.set(broken.id, [{ status: 503 }, { status: 404 }]);
  const handle = await start(delivery([fine, broken, caller]));

  expect(await handle.result()).toBe("partially_failed");
  expect(await relayStatus(handle)).toBe("partially_failed");
  const tried = attemptsOf(handle.workflowId);
  expect(tried.map((a) => `${a.targetId} ${a.via} ${a.status}`).sort()).toEqual(
    [
      `${fine.id} firstAttempt 200`,
      `${broken.id} firstAttempt 503`,
      `${broken.id} deliver 404`,
    ].sort(),
  );
  // A rejection is not retried: the one deliver is Temporal's first attempt.
  expect(tried.filter((a) => a.via === "deliver").map((a) => a.temporalAttempt)).toEqual([1]);
  await recordHistory(handle, "partially-failed");
});

test("a delivery its project's share turns away waits the worker's wait, holding no attempt, then delivers", async () => {
  const t = target("crowded");
  busyTimes.set(t.id, 2);
  const handle = await start(delivery([t]));
  expect(await handle.result()).toBe("delivered");
  // Turned away on the first try and on the next: two timers of the worker's 300 ms, then one
  // attempt, the request's first.
  expect(await timers(handle)).toEqual([300, 300]);
  const mine = (c: { args: unknown[] }) => JSON.stringify(c.args).includes(handle.workflowId);
  expect(callsOf("firstAttempt").filter(mine)).toHaveLength(1);
  expect(callsOf("deliver").filter(mine)).toHaveLength(2);
  expect(attemptsOf(handle.workflowId)).toMatchObject([
    { attempt: 1, via: "deliver", status: 200 },
  ]);
});

test("a replay of the failed targets tries only them and settles from all attempts", async () => {
  const fine = target("fine");
  const broken = target("broken");
  script.set(broken.id, [{ status: 404 }, { status: 200 }]);
  const original = delivery([fine, broken]);
  expect(await (await start(original)).result()).toBe("partially_failed");

  const firstAttempts = callsOf("firstAttempt").length;
  // As control/api/failures.ts replays: the original input, with only the failed targets.
  const replay = await start({ ...original, targets: [broken] }, `${original.requestId}-replay-1`);
  expect(await replay.result()).toBe("delivered");
  const replayed = callsOf("firstAttempt").slice(firstAttempts);
  expect(replayed.map((c) => (c.args[1] as DeliverInput).target.id)).toEqual([broken.id]);
  expect(replayed.map((c) => c.args[2])).toEqual([true]);
  expect(
    attemptsOf(original.requestId).map((a) => `${a.targetId} ${a.attempt} ${a.status}`),
  ).toEqual([`${fine.id} 1 200`, `${broken.id} 1 404`, `${broken.id} 2 200`]);
  expect(await relayStatus(replay)).toBe("delivered");
  await recordHistory(replay, "replayed-failed-target");
});

/** An input asking to be delivered `delayMs` after it was received. */
function delayed(targets: DeliveryTarget[], delayMs: number): DeliveryInput {
  const input = delivery(targets);
  return { ...input, notBefore: new Date(Date.parse(input.receivedAt) + delayMs).toISOString() };
}

/** Resolves once the workflow has made `name`'s call. */
async function called(name: keyof Activities, requestId: string) {
  for (let i = 0; i < 200; i++) {
    if (callsOf(name).some((c) => JSON.stringify(c.args).includes(requestId))) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${name} call for ${requestId}`);
}

test("a delayed deliverRequest opens its request scheduled, waits on a timer, then delivers", async () => {
  const later = target("later");
  const input = delayed([later], 1500);
  const handle = await start(input);

  expect(await handle.result()).toBe("delivered");
  const { targets: _, headers: __, bodyBase64: ___, ...request } = input;
  const scheduled = callsOf("openRequest").find(
    (c) => c.args[1] === "scheduled" && (c.args[0] as RequestRow).requestId === input.requestId,
  );
  expect(scheduled?.args[0]).toEqual(request);
  const [wait] = await timers(handle);
  expect(wait).toBeGreaterThan(1000);
  expect(wait).toBeLessThanOrEqual(1500);
  const [tried] = attemptsOf(input.requestId) as [Attempt];
  expect(tried.at - Date.parse(input.receivedAt)).toBeGreaterThanOrEqual(1500);
  await recordHistory(handle, "delayed");
});

test("a cancelled deliverRequest stops where it waits, makes no further attempt and ends cancelled", async () => {
  const waiting = target("waiting");
  const scheduled = await start(delayed([waiting], 60_000));
  await called("openRequest", scheduled.workflowId);
  await scheduled.cancel();
  expect(await scheduled.result()).toBe("cancelled");
  expect(attemptsOf(scheduled.workflowId)).toEqual([]);
  expect(callsOf("cancelRequest").map((c) => (c.args[0] as RequestRow).requestId)).toContain(
    scheduled.workflowId,
  );
  expect(await relayStatus(scheduled)).toBe("cancelled");
  await recordHistory(scheduled, "cancelled-while-scheduled");

  const down = target("down");
  script.set(down.id, [{ status: 503, retryAfter: "60" }]);
  const retrying = await start(delivery([down]));
  await called("firstAttempt", retrying.workflowId);
  await retrying.cancel();
  expect(await retrying.result()).toBe("cancelled");
  expect(attemptsOf(retrying.workflowId)).toHaveLength(1);
  expect(await relayStatus(retrying)).toBe("cancelled");
});

test("a deliverRequest cancelled before its first task never tries its targets", async () => {
  const never = target("never");
  const input = delivery([never]);
  // Its first task waits (Temporal's start delay), so the cancel is there when it runs.
  const handle = await env.client.workflow.start<typeof deliverRequest>("deliverRequest", {
    taskQueue,
    workflowId: input.requestId,
    args: [input],
    startDelay: "2 seconds",
  });
  await handle.cancel();
  expect(await handle.result()).toBe("cancelled");
  expect(attemptsOf(input.requestId)).toEqual([]);
  expect(callsOf("cancelRequest").map((c) => (c.args[0] as RequestRow).requestId)).toContain(
    input.requestId,
  );
});

test("deliverRequest does not send again what a first attempt whose verdict was lost delivered", async () => {
  const lost = target("lost-verdict");
  const handle = await start({ ...delivery([lost]), project: "lost-first" });

  expect(await handle.result()).toBe("delivered");
  // The first attempt delivered; its local activity failed, and the retry read the log first.
  expect(attemptsOf(handle.workflowId).map((a) => [a.via, a.status])).toEqual([
    ["firstAttempt", 200],
  ]);
  const [retry] = callsOf("deliver").filter(
    (c) => (c.args[0] as DeliverInput).target.id === lost.id,
  );
  expect(retry?.args[0]).toMatchObject({ mayHaveLanded: true });
});

test("a request that asked for callbacks starts each target's callback as its delivery ends", async () => {
  const [quick, slow] = [target("quick"), target("slow")];
  script.set(slow.id, [{ status: 503 }, { status: 200 }]);
  const input = {
    ...delivery([quick, slow]),
    callbacks: { delivered: "https://caller.example/done" },
  };
  const handle = await start(input);
  const callbackOf = (t: DeliveryTarget) =>
    env.client.workflow.getHandle(`callback.${input.requestId}.${t.id}`);
  expect(await handle.result()).toBe("delivered");
  // Started on the notifications' queue, which this worker does not poll: each waits there,
  // the quick target's started before the slow one's retry was made.
  const quickOne = await callbackOf(quick).describe();
  expect(quickOne.type).toBe("sendCallback");
  expect((await callbackOf(slow).describe()).type).toBe("sendCallback");
  const retried = attemptsOf(handle.workflowId).find((a) => a.via === "deliver");
  expect(quickOne.startTime.getTime()).toBeLessThanOrEqual(retried?.at ?? 0);
  for (const t of [quick, slow]) await callbackOf(t).terminate("the test ends it");
  await recordHistory(handle, "delivered-with-callbacks");

  const job = { project: "acme", requestId: input.requestId, replay: 0, targetId: quick.id };
  const sent = await env.client.workflow.start<typeof sendCallback>("sendCallback", {
    taskQueue,
    workflowId: `callback.again.${input.requestId}`,
    args: [{ ...job, callbacks: input.callbacks }],
  });
  expect(await sent.result()).toBe("sent");
  expect(callsOf("callBack").at(-1)?.args).toEqual([{ ...job, callbacks: input.callbacks }]);
  await recordHistory(sent, "callback-sent");
});
