/**
 * A schedule's fires through SIGKILL (docs/api.md "Schedules"): a fire made while the control
 * plane and the worker are dead is sent once they are back; a fire in flight when its control
 * plane dies is sent again by another try, and its Idempotency-Key keeps the target from getting
 * it twice. A stack of its own, so the test can kill its processes.
 */
import { createServer } from "node:http";
import { Client, Connection } from "@temporalio/client";
import { expect, test } from "vitest";
import { eventually } from "./helpers.ts";
import { ownStack } from "./own-stack.ts";

const { stack, call, projectWithTarget } = ownStack("schedule-durability");

/** A target answering each fire after `delayMs`, noting each one's schedule id as it arrives. */
async function slowTarget(delayMs: number) {
  const received: string[] = [];
  const server = createServer((req, res) => {
    received.push(String(req.headers["relay-schedule-id"]));
    req.resume();
    setTimeout(() => res.end("ok"), delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/in`;
  return { received, url, close: () => server.close() };
}

/** A paid project whose endpoint v1/hook has one target, and a yearly schedule on it. */
async function scheduled(slug: string, targetUrl: string, deliveryMode: "async" | "sync") {
  const { ownerToken } = await projectWithTarget(slug, targetUrl, 30, deliveryMode);
  const schedule = await call(
    ownerToken,
    "POST",
    `/projects/${slug}/lines/v1/endpoints/hook/schedules`,
    {
      cron: "0 0 1 1 *",
      body: { from: "cron" },
    },
  );
  const scheduleId = schedule.scheduleId as string;
  const read = () => call(ownerToken, "GET", `/projects/${slug}/schedules/${scheduleId}`);
  return { scheduleId, read };
}

async function triggerInTemporal(scheduleId: string): Promise<void> {
  const connection = await Connection.connect({ address: stack().temporal.address });
  try {
    await new Client({ connection }).schedule.getHandle(scheduleId).trigger();
  } finally {
    await connection.close();
  }
}

test("a fire while the control plane and the worker are SIGKILLed is sent once they are back", async () => {
  const target = await slowTarget(0);
  const { scheduleId, read } = await scheduled("fire-while-down", target.url, "async");
  stack().processes.control.kill();
  stack().processes.worker.kill();
  await triggerInTemporal(scheduleId);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  expect(target.received).toEqual([]);
  await stack().processes.control.start();
  await stack().processes.worker.start();
  await eventually(async () => target.received.length >= 1, 60_000);
  expect(await eventually(async () => (await read()).fires === 1 && (await read()))).toMatchObject({
    lastStatus: 202,
  });
  // Nothing more comes of it.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  expect(target.received).toEqual([scheduleId]);
  target.close();
}, 120_000);

test("a fire in flight when its control plane is SIGKILLed is sent again, and delivered once", async () => {
  // A sync target: the fire's call waits on it, so the control plane dies mid-call.
  const target = await slowTarget(8000);
  const { scheduleId, read } = await scheduled("fire-in-flight", target.url, "sync");
  await triggerInTemporal(scheduleId);
  await eventually(async () => target.received.length === 1, 30_000);
  stack().processes.control.kill();
  await stack().processes.control.start();
  // The lost try stops beating; another (same Idempotency-Key) gets the first call's answer.
  const fired = await eventually(async () => {
    const s = await read();
    return s.fires === 1 && s;
  }, 60_000);
  expect(fired.lastStatus).toBe(200);
  expect(target.received).toEqual([scheduleId]);
  target.close();
}, 120_000);
