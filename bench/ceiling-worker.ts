/**
 * The ceiling probe's worker, in a process of its own as Relay's worker is: bare workflows and a
 * no-op activity on the task queue BENCH_TASK_QUEUE of the server at TEMPORAL_ADDRESS. With
 * BENCH_PAYLOAD_SECRET, its payloads are sealed as Relay's are (core/payload-codec.ts).
 */
import { fileURLToPath } from "node:url";
import { NativeConnection, Worker } from "@temporalio/worker";
import { PayloadCipher } from "../core/payload-codec.ts";
import { nodeAesGcm } from "../platform/node-crypto.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import { workerPolling } from "../workflows/tuning.ts";
import * as activities from "./ceiling-activities.ts";

const address = process.env.TEMPORAL_ADDRESS;
const taskQueue = process.env.BENCH_TASK_QUEUE;
if (!address || !taskQueue) throw new Error("TEMPORAL_ADDRESS and BENCH_TASK_QUEUE");
const secret = process.env.BENCH_PAYLOAD_SECRET;
const worker = await Worker.create({
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  ...workerPolling,
  workflowsPath: fileURLToPath(new URL("./ceiling-workflows.ts", import.meta.url)),
  activities,
  ...(secret && {
    dataConverter: relayDataConverter(await PayloadCipher.fromSecrets([secret], nodeAesGcm)),
  }),
});
process.once("SIGTERM", () => worker.shutdown());
process.once("SIGINT", () => worker.shutdown());
const running = worker.run();
console.log(JSON.stringify({ msg: "ceiling worker polling", taskQueue }));
await running;
