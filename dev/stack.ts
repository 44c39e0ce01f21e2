/**
 * The whole Relay stack on one machine: Postgres (embedded unless DATABASE_URL), Temporal (the
 * CLI dev server, or Temporal's own server on that Postgres, unless TEMPORAL_ADDRESS), control
 * plane, worker, edge and the demo receiver. `npm start` and the tests both run it.
 */
import { mkdir, readFile } from "node:fs/promises";
import { buildPanel } from "./panel.ts";
import { freeLowPorts } from "./ports.ts";
import { embeddedPostgresDir, embeddedPostgresUrl, postmasterPid } from "./postgres.ts";
import {
  defaultRestartPolicy,
  logFile,
  ManagedProcess,
  type RestartPolicy,
  StartError,
} from "./processes.ts";
import { type DevSecrets, loadOrCreateSecrets } from "./secrets.ts";
import { findTemporalCli, startTemporalDevServer, type TemporalPorts } from "./temporal.ts";
import type { TemporalServerTls } from "./temporal-config.ts";
import {
  findTemporalServer,
  startTemporalServer,
  type TemporalServerKind,
  temporalPostgresOf,
} from "./temporal-server.ts";

export interface StackPorts {
  postgres: number;
  temporal: TemporalPorts;
  control: number;
  edge: number;
  /** The worker's ops listener (/healthz, /readyz, /metrics). */
  worker: number;
  demo: number;
}

/**
 * A whole stack's ports, all free now, for tests and benchmarks beside a running stack: outside
 * the ephemeral range, which the other stacks' outbound connections draw from while this one's
 * processes start.
 */
export async function freeStackPorts(): Promise<StackPorts> {
  const [postgres, grpc, http, ui, control, edge, worker, demo] = (await freeLowPorts(8)) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return { postgres, temporal: { grpc, http, ui }, control, edge, worker, demo };
}

export const defaultPorts: StackPorts = {
  postgres: 5433,
  temporal: { grpc: 7233, http: 7243, ui: 8233 },
  control: 8788,
  edge: 8787,
  worker: 8790,
  demo: 8789,
};

export interface StackOptions {
  dir: string;
  ports: StackPorts;
  /** "inherit" prints every process's lines; a path appends them to that file. */
  output: "inherit" | string;
  /** Passed to every Relay process, after the stack's own settings. */
  env?: Record<string, string>;
  /**
   * The Temporal the stack runs unless `external` names one: the CLI's dev server (SQLite, one
   * history shard; the default) or Temporal's own server on the stack's PostgreSQL.
   */
  temporalServer?: TemporalServerKind;
  /**
   * Temporal's own server serves its frontend (gRPC and the HTTP API) over TLS with this
   * certificate, and Relay's processes trust its CA (TEMPORAL_TLS_CA).
   */
  temporalTls?: TemporalServerTls;
  /** Honour DATABASE_URL and TEMPORAL_ADDRESS from the environment (npm start does). */
  external?: {
    databaseUrl?: string | undefined;
    temporalAddress?: string | undefined;
    temporalHttpAddress?: string | undefined;
  };
  /**
   * Restart Postgres, the Temporal dev server and Relay's processes when one exits on its own
   * (npm start does). After too many crashes the stack stops and `onGiveUp` is told why.
   */
  supervise?: { onGiveUp(reason: string): void } & Partial<RestartPolicy>;
}

export interface Stack {
  databaseUrl: string;
  temporal: {
    address: string;
    httpAddress: string;
    uiUrl: string | null;
    /** Each node's own HTTP API when Temporal is a cluster behind `httpAddress`. */
    nodeHttpAddresses?: string[];
  };
  controlUrl: string;
  edgeUrl: string;
  demoUrl: string;
  secrets: DevSecrets;
  processes: Record<"control" | "worker" | "edge" | "demo", ManagedProcess>;
  /** Stops the stack's Temporal and starts it again on the same store (tests). */
  restartTemporal(): Promise<void>;
  /**
   * The pids of the servers the stack runs itself (its embedded Postgres's postmaster, its
   * Temporal server), null for an external one or one not running: benches read their CPU.
   */
  serverPids(): Promise<{ postgres: number | null; temporal: number | null }>;
  stop(): Promise<void>;
}

/** Says why a check could not run, with the last lines of its stack's log. */
export async function couldNotRun(error: unknown, logFile: string): Promise<void> {
  console.error(`the check could not run: ${(error as Error).message}`);
  const log = await readFile(logFile, "utf8").catch(() => "");
  if (log)
    console.error(`--- the stack's last lines ---\n${log.split("\n").slice(-40).join("\n")}`);
}

/** A POST to the stack's control plane as `token` (the checks' setup); its JSON answer. */
export async function postToControl<T = Record<string, string>>(
  stack: Pick<Stack, "controlUrl">,
  token: string,
  path: string,
  body: unknown,
): Promise<T> {
  const response = await fetch(`${stack.controlUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const { dir, ports } = options;
  const ownServer = options.temporalServer === "postgres" || options.temporalServer === "cluster";
  if (options.temporalTls && !ownServer) {
    throw new StartError("TLS needs Temporal's own server (RELAY_TEMPORAL_SERVER=postgres)");
  }
  await mkdir(dir, { recursive: true });
  const stops: (() => Promise<void>)[] = [];
  const supervisedProcesses: ManagedProcess[] = [];
  const stop = async () => {
    for (const managed of supervisedProcesses) managed.supervise(null);
    for (const s of [...stops].reverse()) await s().catch((e) => console.error(e));
  };
  const supervised = (managed: ManagedProcess) => {
    if (options.supervise) {
      supervisedProcesses.push(managed);
      const { onGiveUp, ...policy } = options.supervise;
      managed.supervise({
        ...defaultRestartPolicy,
        ...policy,
        onGiveUp: (reason) => void stop().then(() => onGiveUp(reason)),
      });
    }
    return managed;
  };
  try {
    const secrets = await loadOrCreateSecrets(dir);
    // The control plane serves the panel's files, so they exist before it starts.
    await buildPanel();
    const external = options.external ?? {};
    const output = options.output === "inherit" ? "inherit" : logFile(options.output);
    // Found (or built) first: a missing CLI should fail before anything else starts.
    const temporalSource = external.temporalAddress
      ? {
          kind: "external" as const,
          address: external.temporalAddress,
          httpAddress: external.temporalHttpAddress ?? "http://127.0.0.1:7243",
          uiUrl: null,
        }
      : ownServer
        ? {
            kind: "postgres" as const,
            binaries: await findTemporalServer(),
            nodes: options.temporalServer === "cluster" ? 2 : 1,
          }
        : { kind: "dev" as const, cli: await findTemporalCli() };
    let databaseUrl = external.databaseUrl;
    if (!databaseUrl) {
      const pg = supervised(
        new ManagedProcess(
          {
            name: "postgres",
            entry: "dev/postgres-server.ts",
            env: { RELAY_POSTGRES_DIR: dir, RELAY_POSTGRES_PORT: String(ports.postgres) },
            readyLine: "postgres ready",
          },
          output,
        ),
      );
      stops.push(() => pg.stop());
      await pg.start(120_000);
      databaseUrl = embeddedPostgresUrl(ports.postgres);
    }
    const controlUrl = `http://127.0.0.1:${ports.control}`;
    let temporal: Stack["temporal"];
    let restartTemporal: Stack["restartTemporal"] = async () => {
      throw new Error("Temporal is external to this stack");
    };
    let temporalPid = (): number | null => null;
    if (temporalSource.kind === "external") {
      temporal = temporalSource;
    } else {
      const running =
        temporalSource.kind === "dev"
          ? // Its UI decodes Relay's sealed payloads through the control plane, on the same site
            // (127.0.0.1) so an operator's session cookie goes with its calls.
            await startTemporalDevServer(temporalSource.cli, dir, ports.temporal, {
              output,
              uiCodecEndpoint: `${controlUrl}/codec`,
            })
          : await startTemporalServer(temporalSource.binaries, dir, ports.temporal, {
              postgres: temporalPostgresOf(databaseUrl),
              nodes: temporalSource.nodes,
              tls: options.temporalTls,
              output,
            });
      const nodes = running.nodes ?? [running.process];
      for (const node of nodes) supervised(node);
      stops.push(() => running.stop());
      temporal = running;
      // All of a cluster's nodes down at once, then up one after another, as the first start.
      restartTemporal = async () => {
        await Promise.all(nodes.map((node) => node.stop()));
        for (const node of nodes) await node.start();
      };
      temporalPid = () => running.process.child?.pid ?? null;
    }

    const shared = {
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_HTTP_ADDRESS: temporal.httpAddress,
      ...(options.temporalTls && { TEMPORAL_TLS_CA: options.temporalTls.caFile }),
      RELAY_ADMIN_TOKEN: secrets.adminToken,
      RELAY_EDGE_TOKEN: secrets.edgeToken,
      RELAY_ENCRYPTION_KEY: secrets.encryptionKey,
      RELAY_CONTROL_URL: controlUrl,
      RELAY_CONTROL_PORT: String(ports.control),
      RELAY_EDGE_PORT: String(ports.edge),
      RELAY_WORKER_PORT: String(ports.worker),
      RELAY_WORKER_URL: `http://127.0.0.1:${ports.worker}`,
      RELAY_DEMO_PORT: String(ports.demo),
      RELAY_EDGE_DOMAIN: `localhost:${ports.edge}`,
      RELAY_EDGE_URL: `http://127.0.0.1:${ports.edge}`,
      // No delivery may call the edge where it listens (the worker cannot tell by itself).
      RELAY_EDGE_LISTENERS: `127.0.0.1:${ports.edge}`,
      ...(temporal.uiUrl && { RELAY_TEMPORAL_UI_URL: temporal.uiUrl }),
      // The demo receiver and test targets listen on loopback.
      RELAY_ALLOW_PRIVATE_TARGETS: "1",
      ...options.env,
    };
    const process = (name: string, entry: string, readyLine: string) =>
      supervised(new ManagedProcess({ name, entry, env: shared, readyLine }, output));
    const processes = {
      demo: process("demo", "dev/demo-receiver.ts", "demo receiver listening"),
      control: process("control", "control/main.ts", "control plane listening"),
      worker: process("worker", "workflows/worker.ts", "worker polling"),
      edge: process("edge", "edge/main.ts", "edge listening"),
    };
    // In dependency order: the control plane migrates before the worker writes.
    for (const managed of [processes.demo, processes.control, processes.worker, processes.edge]) {
      stops.push(() => managed.stop());
      await managed.start();
    }
    return {
      databaseUrl,
      temporal,
      controlUrl,
      edgeUrl: `http://127.0.0.1:${ports.edge}`,
      demoUrl: `http://127.0.0.1:${ports.demo}`,
      secrets,
      processes,
      restartTemporal,
      serverPids: async () => ({
        postgres: external.databaseUrl ? null : await postmasterPid(embeddedPostgresDir(dir)),
        temporal: temporalPid(),
      }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
