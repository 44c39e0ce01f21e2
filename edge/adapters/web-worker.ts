/**
 * A sandbox thread as a Web Worker (Deno's, a browser's): the runtime-standard Worker, a module
 * that answers with `serveSandbox` (./sandbox-thread.deno.ts).
 */
import type { ThreadAnswer, ThreadJob } from "../../core/sandbox.ts";
import type { SandboxThread } from "../../core/transform-pool.ts";

/** The slice of the Web Worker API this file uses (the project's types are Node's). */
interface WebWorker {
  postMessage(message: ThreadJob): void;
  onmessage: ((event: { data: ThreadAnswer }) => void) | null;
  onerror: ((event: { message?: string; preventDefault(): void }) => void) | null;
  terminate(): void;
}
declare const Worker: new (url: URL, options: { type: "module" }) => WebWorker;

export function webWorkerThread(module: URL): SandboxThread {
  const worker = new Worker(module, { type: "module" });
  return {
    post: (job) => worker.postMessage(job),
    listen(answer, failed) {
      worker.onmessage = (event) => answer(event.data);
      worker.onerror = (event) => {
        event.preventDefault(); // the thread's failure is the pool's to handle, not the process's
        failed(event.message ?? "the thread failed");
      };
    },
    terminate: () => worker.terminate(),
  };
}
