/**
 * Task queue fairness on the dev server Relay runs (v1.29.1, where it is a pre-release behind
 * dynamic config): with Relay's configuration, a project's few tasks behind another project's
 * backlog of a hundred are dispatched in turn with it, not after it; with fairness off they wait
 * for the whole backlog. Both servers run here, so the test shows the setting is what does it.
 */
import { TestWorkflowEnvironment } from "@temporalio/testing";
import { DefaultLogger, Runtime } from "@temporalio/worker";
import { afterAll, expect, test } from "vitest";
import { BACKLOG, victimPlaces } from "./fairness-probe.ts";
import { findTemporalCli } from "./temporal.ts";
import {
  type DynamicConfig,
  devServerFlags,
  temporalDynamicConfig,
  withoutFairness,
} from "./temporal-config.ts";

Runtime.install({ logger: new DefaultLogger("WARN") });

const environments: TestWorkflowEnvironment[] = [];
afterAll(async () => {
  await Promise.all(environments.map((env) => env.teardown()));
});

/** The probe on a dev server of its own, with `config`. */
async function onDevServer(config: DynamicConfig): Promise<number[]> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: "existing-path", path: await findTemporalCli() },
      extraArgs: devServerFlags(config),
    },
  });
  environments.push(env);
  return victimPlaces(env.client, env.nativeConnection, "fairness");
}

test("with Relay's configuration, a project's tasks are not queued behind another project's backlog", async () => {
  const [fair, fifo] = await Promise.all([
    onDevServer(temporalDynamicConfig),
    onDevServer(withoutFairness),
  ]);
  // In turn with the backlog: among the first few dozen, not behind all hundred.
  expect(Math.max(...fair)).toBeLessThan(BACKLOG / 2);
  expect(Math.min(...fifo)).toBeGreaterThanOrEqual(BACKLOG / 2);
}, 180_000);
