/** Node's sandbox threads for transformations (core/transform-pool.ts): worker threads. */
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { schedstatClock, type ThreadClock } from "../core/sandbox.ts";
import { type SandboxThread, sandboxThreads, TransformPool } from "../core/transform-pool.ts";

/** The thread's module: its build under dist/, or its source, loaded through tsx. */
const fromSource = import.meta.url.endsWith(".ts");
const threadModule = new URL(
  fromSource ? "./sandbox-thread.ts" : "./sandbox-thread.js",
  import.meta.url,
);

export function nodeTransformPool(): TransformPool {
  return new TransformPool(spawnThread, sandboxThreads(availableParallelism()));
}

/** The calling thread's CPU time (core/sandbox.ts `ThreadClock`), on Linux. */
export function nodeThreadClock(): ThreadClock | undefined {
  return schedstatClock(() => readFileSync("/proc/thread-self/schedstat", "latin1"));
}

function spawnThread(): SandboxThread {
  const worker = fromSource
    ? new Worker(
        `import("tsx/esm/api").then((tsx) => tsx.tsImport(${JSON.stringify(threadModule.href)}, ${JSON.stringify(import.meta.url)}))`,
        { eval: true },
      )
    : new Worker(threadModule);
  worker.unref(); // an idle sandbox keeps no process alive
  return {
    post: (job) => worker.postMessage(job),
    listen(answer, failed) {
      worker.on("message", answer);
      worker.once("error", failed);
      worker.once("exit", (code) => failed(`the thread exited (${code})`));
    },
    terminate: () => void worker.terminate(),
  };
}
