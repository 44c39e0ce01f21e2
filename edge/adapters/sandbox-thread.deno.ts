/**
 * A sandbox thread on Deno (a Web Worker): edge/main.deno.ts spawns it (./web-worker.ts). Its runs
 * are timed on the clock: Deno reads a thread's CPU time (/proc) only with --allow-all.
 */
import {
  SANDBOX_WASM,
  serveSandbox,
  type ThreadAnswer,
  type ThreadJob,
} from "../../core/sandbox.ts";

/** The worker's global scope, and Deno's file read, as much of them as this file uses. */
declare const self: {
  onmessage: ((event: { data: ThreadJob }) => void) | null;
  postMessage(answer: ThreadAnswer): void;
};
declare const Deno: { readFile(path: URL): Promise<Uint8Array<ArrayBuffer>> };

void serveSandbox(
  {
    onJob: (handle) => {
      self.onmessage = (event) => handle(event.data);
    },
    answer: (answer) => self.postMessage(answer),
  },
  Deno.readFile(new URL(import.meta.resolve(SANDBOX_WASM))),
);
