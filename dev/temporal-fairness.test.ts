/**
 * Task queue fairness on the dev server Relay runs (v1.29.1, where it is a pre-release behind
 * dynamic config): with Relay's configuration, a project's few tasks behind another project's
 * backlog of a hundred are dispatched in turn with it, not after it; with fairness off they wait
 * for the whole backlog. Both servers run here, so the test shows the setting is what does it.
 */
import { fileURLToPath } from "node:url";
import { TestWorkflowEnvironment } from "@temporalio/testing";
import { DefaultLogger, Runtime, Worker } from "@temporalio/worker";
import { afterAll, expect, test } from "vitest";
import { fairnessOf } from "../core/temporal.ts";
import { findTemporalCli } from "./temporal.ts";
import {
  type DynamicConfig,
  devServerFlags,
  temporalDynamicConfig,
  withoutFairness,
} from "./temporal-config.ts";

Runtime.install({ logger: new DefaultLogger("WARN") });

const BACKLOG = 100;
const VICTIM = 3;
const environments: TestWorkflowEnvironment[] = [];
afterAll(async () => {
  await Promise.all(environments.map((env) => env.teardown()));
});

/**
 * Queues BACKLOG workflows of one project, then VICTIM of another, with no worker polling; then
 * one worker with one workflow-task slot runs them all. Answers where the victim's finished, in
 * the order every workflow finished (0 first).
 */
async function victimPlaces(config: DynamicConfig): Promise<number[]> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: "existing-path", path: await findTemporalCli() },
      extraArgs: devServerFlags(config),
    },
  });
  environments.push(env);
  const taskQueue = "fairness";
  const start = (project: string, i: number) =>
    env.client.workflow.start("noActivity", {
      taskQueue,
      workflowId: `${project}-${i}`,
      priority: fairnessOf(project),
    });
  const handles = [];
  for (let i = 0; i < BACKLOG; i++) handles.push(await start("flood", i));
  for (let i = 0; i < VICTIM; i++) handles.push(await start("victim", i));
  const worker = await Worker.create({
    connection: env.nativeConnection,
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
  return order.flatMap((id, place) => (id.startsWith("victim") ? [place] : []));
}

test("with Relay's configuration, a project's tasks are not queued behind another project's backlog", async () => {
  const [fair, fifo] = await Promise.all([
    victimPlaces(temporalDynamicConfig),
    victimPlaces(withoutFairness),
  ]);
  // In turn with the backlog: among the first few dozen, not behind all hundred.
  expect(Math.max(...fair)).toBeLessThan(BACKLOG / 2);
  expect(Math.min(...fifo)).toBeGreaterThanOrEqual(BACKLOG / 2);
}, 180_000);
