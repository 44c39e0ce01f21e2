import { describe, expect, test } from "vitest";
import { READY, type ThreadJob } from "./sandbox.ts";
import type { SandboxCall } from "./transform.ts";
import { type SandboxThread, TransformPool } from "./transform-pool.ts";

const request: SandboxCall = { path: "/", query: {}, headers: {}, bodyText: "{}" };

/** Threads that answer only when told, so a test decides the order runs end in. */
function manualThreads() {
  const threads: { jobs: ThreadJob[]; answer: (job: ThreadJob) => void; ended: boolean }[] = [];
  const spawn = (): SandboxThread => {
    const thread = { jobs: [] as ThreadJob[], answer: (_: ThreadJob) => {}, ended: false };
    threads.push(thread);
    return {
      post: (job) => thread.jobs.push(job),
      listen(answer) {
        const { bodyText: _, ...returned } = request;
        thread.answer = (job) =>
          answer({ id: job.id, run: { output: JSON.stringify(returned), bodyText: null } });
        queueMicrotask(() => answer(READY));
      },
      terminate: () => {
        thread.ended = true;
      },
    };
  };
  return { threads, spawn };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("the sandbox threads", () => {
  test("take each project's runs in turn: one project's many wait behind another's one", async () => {
    const { threads, spawn } = manualThreads();
    const pool = new TransformPool(spawn, 1);
    const order: string[] = [];
    const runFor = (project: string) =>
      pool.run(project, `(r) => r /* ${project} */`, request).then(() => order.push(project));
    const runs = [runFor("busy"), runFor("busy"), runFor("busy"), runFor("calm")];
    for (let i = 0; i < 4; i++) {
      await tick();
      const [thread] = threads;
      const job = thread?.jobs[i];
      if (job) thread?.answer(job);
    }
    await Promise.all(runs);
    expect(order).toEqual(["busy", "calm", "busy", "busy"]);
  });

  test("a project's run goes to the thread that ran it last, when that one is idle", async () => {
    const { threads, spawn } = manualThreads();
    const pool = new TransformPool(spawn, 2);
    const answerAll = async () => {
      await tick();
      for (const thread of threads) {
        const job = thread.jobs.at(-1);
        if (job) thread.answer(job);
      }
    };
    const first = [pool.run("a", "(r) => r", request), pool.run("b", "(r) => r", request)];
    await tick(); // the threads start and say they are ready
    await answerAll();
    await Promise.all(first);
    const again = [pool.run("b", "(r) => r", request), pool.run("a", "(r) => r", request)];
    await answerAll();
    await Promise.all(again);
    expect(threads.map((t) => t.jobs.map((j) => j.project))).toEqual([
      ["a", "a"],
      ["b", "b"],
    ]);
  });

  test("no project holds every thread: another's run finds one free of the first's", async () => {
    const { threads, spawn } = manualThreads();
    const pool = new TransformPool(spawn, 2);
    void pool.run("busy", "(r) => { for (;;) {} }", request);
    void pool.run("busy", "(r) => { for (;;) {} }", request);
    await tick();
    void pool.run("calm", "(r) => r", request);
    await tick();
    expect(threads.map((t) => t.jobs.map((j) => j.project))).toEqual([["busy"], ["calm"]]);
    pool.close();
  });

  test("a run past its time ends its thread and fails; the next run has a new thread", async () => {
    const { threads, spawn } = manualThreads();
    const pool = new TransformPool(spawn, 1);
    const overrun = await pool.run("p", "(r) => { for (;;) {} }", request);
    expect(overrun).toEqual({ error: "it ran past 50 ms" });
    expect(threads[0]?.ended).toBe(true);
    const next = pool.run("p", "(r) => r", request);
    await tick();
    const job = threads[1]?.jobs[0];
    if (job) threads[1]?.answer(job);
    const { bodyText: _, ...returned } = request;
    expect(await next).toEqual({ call: { ...returned, bodyText: null } });
  });
});
