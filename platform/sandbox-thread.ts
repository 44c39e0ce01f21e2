/** A sandbox thread on Node (a worker thread): ./transforms.ts spawns it. */
import { readFile } from "node:fs/promises";
import { parentPort } from "node:worker_threads";
import { SANDBOX_WASM, serveSandbox, type ThreadJob } from "../core/sandbox.ts";
import { nodeThreadClock } from "./transforms.ts";

const port = parentPort;
if (!port) throw new Error("platform/sandbox-thread.ts runs as a worker thread");
void serveSandbox(
  {
    onJob: (handle) => port.on("message", (job: ThreadJob) => handle(job)),
    answer: (answer) => port.postMessage(answer),
  },
  readFile(new URL(import.meta.resolve(SANDBOX_WASM))),
  nodeThreadClock(),
);
