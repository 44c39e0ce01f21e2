/** The delivery worker process: polls the delivery task queue and runs workflows and activities. */
import { fileURLToPath } from "node:url";
import { NativeConnection, Worker } from "@temporalio/worker";
import { Agent } from "undici";
import { connect } from "../control/db/client.ts";
import { DELIVERY_TASK_QUEUE } from "../core/delivery.ts";
import { createActivities } from "./activities.ts";
import { loadWorkerConfig } from "./config.ts";

const config = loadWorkerConfig(process.env);
const sql = connect(config.DATABASE_URL);
const connection = await NativeConnection.connect({
  address: config.TEMPORAL_ADDRESS,
  ...(config.TEMPORAL_API_KEY && { apiKey: config.TEMPORAL_API_KEY, tls: true }),
});
// Keep-alive connections to targets; undici's fetch with a dispatcher of our own.
const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
const worker = await Worker.create({
  connection,
  namespace: config.TEMPORAL_NAMESPACE,
  taskQueue: DELIVERY_TASK_QUEUE,
  workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
  activities: createActivities({
    sql,
    fetch: (input, init) => fetch(input, { ...init, dispatcher } as RequestInit),
    now: () => new Date(),
  }),
});
console.log(JSON.stringify({ msg: "worker polling", taskQueue: DELIVERY_TASK_QUEUE }));
await worker.run();
await sql.end({ timeout: 5 });
await connection.close();
