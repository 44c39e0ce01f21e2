import { expect, test } from "vitest";
import { cachedFor, judgeTaskQueue, type QueueReport } from "./task-queue.ts";

const now = new Date("2026-01-01T12:00:00Z");
const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);
const idle: QueueReport = { lastPolls: [ago(50)], backlogCount: 0, backlogAgeSeconds: 0 };

test("a worker whose long poll is under a minute old and an empty queue: no problem", () => {
  expect(judgeTaskQueue({ workflow: idle, activity: idle }, now)).toEqual({
    pollers: { workflow: 1, activity: 1 },
    backlogCount: 0,
    backlogAgeSeconds: 0,
    problem: null,
  });
});

test("no poll for 70 s on a queue names it", () => {
  const gone = { ...idle, lastPolls: [ago(71)] };
  const health = judgeTaskQueue({ workflow: idle, activity: gone }, now);
  expect(health.pollers).toEqual({ workflow: 1, activity: 0 });
  expect(health.problem).toBe("no worker polled the activity task queue in 70 s");
});

test("tasks older than every worker's last poll: no worker takes them, before the minute", () => {
  const dead = { lastPolls: [ago(15)], backlogCount: 3, backlogAgeSeconds: 12 };
  expect(judgeTaskQueue({ workflow: dead, activity: idle }, now).problem).toBe(
    "3 workflow tasks waited 12 s with no worker polling",
  );
  // A busy worker that polled since the oldest task came is taking tasks, however old.
  const busy = { lastPolls: [ago(2)], backlogCount: 500, backlogAgeSeconds: 40 };
  expect(judgeTaskQueue({ workflow: busy, activity: idle }, now).problem).toBeNull();
  // A short wait is no stall.
  const brief = { lastPolls: [ago(15)], backlogCount: 1, backlogAgeSeconds: 6 };
  expect(judgeTaskQueue({ workflow: brief, activity: idle }, now).problem).toBeNull();
});

test("cachedFor shares one load per period and drops a failed one", async () => {
  let clock = 0;
  let loads = 0;
  let fail = false;
  const read = cachedFor(
    5000,
    async () => {
      loads++;
      if (fail) throw new Error("down");
      return loads;
    },
    () => clock,
  );
  expect(await Promise.all([read(), read()])).toEqual([1, 1]);
  clock = 4999;
  expect(await read()).toBe(1);
  clock = 5000;
  fail = true;
  await expect(read()).rejects.toThrow("down");
  fail = false;
  expect(await read()).toBe(3);
});
