/**
 * The Temporal CLI dev server for the dev stack and tests. The CLI is found at TEMPORAL_CLI, on
 * PATH, or in the user cache; else built there once with `go install` (no registry ships it).
 */
import { execFile } from "node:child_process";
import type { WriteStream } from "node:fs";
import { access, constants, mkdir } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { searchAttributes, searchAttributeType } from "../core/temporal.ts";
import { ManagedProcess, StartError } from "./processes.ts";
import { type DynamicConfig, devServerFlags, temporalDynamicConfig } from "./temporal-config.ts";

const CLI_MODULE = "github.com/temporalio/cli/cmd/temporal@v1.5.1";

export const cliCacheDir = join(
  process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"),
  "relay",
  "bin",
);

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

export async function findTemporalCli(): Promise<string> {
  if (process.env.TEMPORAL_CLI) {
    if (await executable(process.env.TEMPORAL_CLI)) return process.env.TEMPORAL_CLI;
    throw new StartError(`TEMPORAL_CLI=${process.env.TEMPORAL_CLI} is not an executable file`);
  }
  for (const dir of [...(process.env.PATH ?? "").split(delimiter), cliCacheDir]) {
    if (dir && (await executable(join(dir, "temporal")))) return join(dir, "temporal");
  }
  return buildTemporalCli();
}

async function buildTemporalCli(): Promise<string> {
  await goInstall("the Temporal CLI", [CLI_MODULE], cliCacheDir, [
    "put the `temporal` binary on PATH (or point TEMPORAL_CLI at it),",
    "set TEMPORAL_ADDRESS (and TEMPORAL_HTTP_ADDRESS) to a running Temporal,",
  ]);
  return join(cliCacheDir, "temporal");
}

/**
 * `go install` of `modules` into `gobin`, saying what it builds while it builds; without Go, a
 * StartError that lists the `alternatives` to installing it.
 */
export async function goInstall(
  what: string,
  modules: string[],
  gobin: string,
  alternatives: string[],
): Promise<void> {
  const go = await promisify(execFile)("go", ["version"]).catch(() => null);
  if (!go) {
    throw new StartError(
      [
        `${what} was not found and Go is not installed to build it.`,
        "Any one of these gets you going:",
        ...[...alternatives, "install Go, and the first start builds it once."].map(
          (line) => `  - ${line}`,
        ),
      ].join("\n"),
    );
  }
  await mkdir(gobin, { recursive: true });
  console.log(`Building ${what} into ${gobin} (once; takes a few minutes)...`);
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 1000);
  const progress = setInterval(
    () => console.log(`  still building ${what} (${seconds()} s)`),
    15_000,
  );
  try {
    await promisify(execFile)("go", ["install", ...modules], {
      env: { ...process.env, GOBIN: gobin },
      maxBuffer: 64 * 1024 * 1024,
    });
  } finally {
    clearInterval(progress);
  }
  console.log(`${what} built in ${seconds()} s`);
}

export interface TemporalPorts {
  grpc: number;
  http: number;
  ui: number;
}

export interface RunningTemporal {
  address: string;
  httpAddress: string;
  /** The Temporal UI: the dev server serves one, Temporal's own server none. */
  uiUrl: string | null;
  /** The server's process (a cluster's first node): supervised like the stack's others. */
  process: ManagedProcess;
  /** Every server process of a cluster, the first one included; absent for one process. */
  nodes?: ManagedProcess[];
  /** Each node's own HTTP API, behind the balancer's `httpAddress` (a cluster's only). */
  nodeHttpAddresses?: string[];
  stop(): Promise<void>;
}

export interface DevServerOptions {
  /** Relay's tuned values unless given (the bench passes Temporal's defaults to compare). */
  dynamicConfig?: DynamicConfig;
  /** Serves the server's Prometheus metrics on this port (the bench reads them). */
  metricsPort?: number;
  /** Where its lines go: the terminal unless given. */
  output?: WriteStream | "inherit";
  /** The codec endpoint its UI decodes payloads with (the control plane's /codec). */
  uiCodecEndpoint?: string;
}

/**
 * The dev server on its SQLite file under `dir`, ready once its HTTP API reads the namespace. A
 * start again (a supervised restart) runs it on the same file and ports: what it held is kept.
 */
export async function startTemporalDevServer(
  cli: string,
  dir: string,
  ports: TemporalPorts,
  options: DevServerOptions = {},
): Promise<RunningTemporal> {
  await mkdir(dir, { recursive: true });
  const args = [
    "server",
    "start-dev",
    "--ip",
    "127.0.0.1",
    "--db-filename",
    join(dir, "temporal.sqlite"),
    "--port",
    String(ports.grpc),
    "--http-port",
    String(ports.http),
    "--ui-port",
    String(ports.ui),
    "--log-level",
    "warn",
    ...devServerFlags(options.dynamicConfig ?? temporalDynamicConfig),
    ...(options.metricsPort ? ["--metrics-port", String(options.metricsPort)] : []),
    ...(options.uiCodecEndpoint ? ["--ui-codec-endpoint", options.uiCodecEndpoint] : []),
    ...Object.values(searchAttributes).flatMap((name) => [
      "--search-attribute",
      `${name}=${searchAttributeType(name)}`,
    ]),
  ];
  const httpAddress = `http://127.0.0.1:${ports.http}`;
  const server = new ManagedProcess(
    {
      name: "temporal",
      command: [cli, ...args],
      env: {},
      serves: async () => {
        const res = await fetch(`${httpAddress}/api/v1/namespaces/default`);
        await res.body?.cancel();
        return res.ok;
      },
    },
    options.output ?? "inherit",
  );
  await server.start();
  return {
    address: `127.0.0.1:${ports.grpc}`,
    httpAddress,
    uiUrl: `http://127.0.0.1:${ports.ui}`,
    process: server,
    stop: () => server.stop(),
  };
}
