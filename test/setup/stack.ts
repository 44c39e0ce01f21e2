/**
 * Starts one real Relay stack for the test run (embedded Postgres, the Temporal dev server or,
 * with RELAY_TEMPORAL_SERVER=postgres, Temporal's own server on that Postgres, control plane,
 * worker, edge) on free ports in a temporary folder, and shares its addresses.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { freeStackPorts, type Stack, startStack } from "../../dev/stack.ts";
import { type TemporalServerKind, temporalServerKindFromEnv } from "../../dev/temporal-server.ts";

export interface StackInfo {
  controlUrl: string;
  edgeUrl: string;
  edgePort: number;
  /** The worker's ops listener. */
  workerUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  temporalHttpAddress: string;
  temporalServer: TemporalServerKind;
  /** The Temporal dev server's UI, which the panel links requests to. */
  temporalUiUrl: string | null;
  adminToken: string;
  /** RELAY_OPERATOR_TOKEN: it opens the codec endpoint and nothing else. */
  operatorToken: string;
  edgeToken: string;
  /** For more instances of the control plane and worker beside the stack's (scale-out). */
  encryptionKey: string;
  logFile: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

let stack: Stack | undefined;
let dir: string | undefined;

export async function setup(project: TestProject) {
  dir = await mkdtemp(join(tmpdir(), "relay-test-"));
  const ports = await freeStackPorts();
  const logFile = join(dir, "stack.log");
  const operatorToken = `ropr_${randomBytes(32).toString("base64url")}`;
  const temporalServer = temporalServerKindFromEnv();
  stack = await startStack({
    dir,
    ports,
    output: logFile,
    env: {
      RELAY_DEV_CLOCK: "1",
      RELAY_BODY_TIMEOUT_MS: "1000",
      RELAY_INITIAL_CREDITS: "100",
      RELAY_OPERATOR_TOKEN: operatorToken,
    },
    temporalServer,
    external: { databaseUrl: process.env.DATABASE_URL },
  });
  project.provide("stack", {
    controlUrl: stack.controlUrl,
    edgeUrl: stack.edgeUrl,
    edgePort: ports.edge,
    workerUrl: `http://127.0.0.1:${ports.worker}`,
    databaseUrl: stack.databaseUrl,
    temporalAddress: stack.temporal.address,
    temporalHttpAddress: stack.temporal.httpAddress,
    temporalServer,
    temporalUiUrl: stack.temporal.uiUrl,
    adminToken: stack.secrets.adminToken,
    operatorToken,
    edgeToken: stack.secrets.edgeToken,
    encryptionKey: stack.secrets.encryptionKey,
    logFile,
  });
}

export async function teardown() {
  await stack?.stop();
  if (dir && !process.env.RELAY_KEEP_TEST_DIR) await rm(dir, { recursive: true, force: true });
}
