/**
 * Whether a Temporal server hands a project's few tasks out in turn with another project's
 * backlog (task queue fairness) or after it: run on the dev server by
 * dev/temporal-fairness.test.ts, on Temporal's own server by test/temporal-server.test.ts.
 */
import { fileURLToPath } from "node:url";
import type { Client } from "@temporalio/client";
import { type NativeConnection, Worker } from "@temporalio/worker";
import { fairnessOf } from "../core/temporal.ts";

export const BACKLOG = 100;
const VICTIM = 3;

/**
 * Queues BACKLOG workflows of one project, then VICTIM of another, on `taskQueue` with no worker
 * polling; then one worker with one workflow-task slot runs them all. Answers where the victim's
 * finished, in the order every workflow finished (0 first).
 */
export async function victimPlaces(
  client: Client,
  connection: NativeConnection,
  taskQueue: string,
): Promise<number[]> {
  const start = (project: string, i: number) =>
    client.workflow.start("noActivity", {
      taskQueue,
      workflowId: `${taskQueue}-${project}-${i}`,
      priority: fairnessOf(project),
    });
  const handles = [];
  for (let i = 0; i < BACKLOG; i++) handles.push(await start("flood", i));
  for (let i = 0; i < VICTIM; i++) handles.push(await start("victim", i));
  const worker = await Worker.create({
    connection,
    namespace: client.options.namespace,
    taskQueue,
    workflowsPath: fileURLToPath(new URL("../bench/ceiling-workflows.ts", import.meta.url)),
    maxConcurrentWorkflowTaskExecutions: 1,
    // One task at a time, so the order they finish in is the order matching handed them out.
    maxCachedWorkflows: 0,
  });
  await worker.runUntil(Promise.all(handles.map((handle) => handle.result())));
  const closed = await Promise.all(
    handles.map(async (handle) => ({
      id: handle.workflowId,
      at: (await handle.describe()).closeTime?.getTime() ?? Number.POSITIVE_INFINITY,
    })),
  );
  const order = closed.sort((a, b) => a.at - b.at).map((workflow) => workflow.id);
  return order.flatMap((id, place) => (id.includes("-victim-") ? [place] : []));
}
