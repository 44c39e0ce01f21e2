/** A second worker beside the stack's, on its Postgres and Temporal: what must hold on two. */
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import { stackEnv, stackLog } from "./helpers.ts";

export async function secondWorker(): Promise<ManagedProcess> {
  const [port = 0] = await freePorts(1);
  return new ManagedProcess(
    {
      name: "worker-2",
      entry: "workflows/worker.ts",
      readyLine: "worker polling",
      env: { ...stackEnv(), RELAY_WORKER_PORT: String(port) },
    },
    stackLog(),
  );
}
