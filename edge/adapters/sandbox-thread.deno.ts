/** A sandbox thread on Deno (a Web Worker): edge/main.deno.ts spawns it (./web-worker.ts). */
import { serveSandbox, type ThreadAnswer, type ThreadJob } from "../../core/sandbox.ts";

/** The worker's global scope, as much of it as this file uses. */
declare const self: {
  onmessage: ((event: { data: ThreadJob }) => void) | null;
  postMessage(answer: ThreadAnswer): void;
};

void serveSandbox({
  onJob: (handle) => {
    self.onmessage = (event) => handle(event.data);
  },
  answer: (answer) => self.postMessage(answer),
});
