/**
 * Temporal's own server (go.temporal.io/server), the engine a production cluster runs, for the
 * stack when RELAY_TEMPORAL_SERVER=postgres: persistence and visibility on PostgreSQL, 4 history
 * shards, Relay's dynamic config from a file, Relay's search attributes and namespace registered
 * through the operator API. Built once with `go install` and cached beside the CLI.
 */
import { execFile } from "node:child_process";
import type { WriteStream } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { Connection, type ConnectionOptions, isGrpcServiceError } from "@temporalio/client";
import { msToTs } from "@temporalio/common/lib/time.js";
import { Agent, fetch as undiciFetch } from "undici";
import { z } from "zod";
import { searchAttributes, searchAttributeType } from "../core/temporal.ts";
import { temporalConnectionOptions } from "../platform/temporal.ts";
import { freeLowPorts } from "./ports.ts";
import { ManagedProcess, StartError } from "./processes.ts";
import { type Balancer, startBalancer } from "./tcp-balancer.ts";
import { cliCacheDir, goInstall, type RunningTemporal, type TemporalPorts } from "./temporal.ts";
import {
  type DynamicConfig,
  dynamicConfigFile,
  type TemporalPostgres,
  type TemporalServerTls,
  temporalDynamicConfig,
  temporalServerConfig,
  toYaml,
} from "./temporal-config.ts";

/**
 * The first release line with task queue fairness generally available (v1.31), which Relay's
 * dynamic config turns on. v1.31.2 is the newest patch of that line whose dependencies all
 * resolve from the Go module proxy and which builds with Go 1.26.8; the CLI's dev server embeds
 * v1.29.1.
 */
export const TEMPORAL_SERVER_VERSION = "v1.31.2";
const MODULE = "go.temporal.io/server";

/**
 * Which Temporal the stack runs: the CLI's dev server (the default), Temporal's own server on
 * PostgreSQL, or (`cluster`) two of its server processes as one cluster behind a balancer.
 */
export const temporalServerKind = z.enum(["dev", "postgres", "cluster"]).default("dev");
export type TemporalServerKind = z.infer<typeof temporalServerKind>;

/** RELAY_TEMPORAL_SERVER for the test stacks, which have no config module of their own. */
export function temporalServerKindFromEnv(): TemporalServerKind {
  const parsed = temporalServerKind.safeParse(process.env.RELAY_TEMPORAL_SERVER || undefined);
  if (parsed.success) return parsed.data;
  throw new StartError(
    `RELAY_TEMPORAL_SERVER=${process.env.RELAY_TEMPORAL_SERVER}: must be "dev", "postgres" or "cluster"`,
  );
}

/** The namespace Relay's processes use unless TEMPORAL_NAMESPACE says otherwise. */
const NAMESPACE = "default";
/** As the dev server keeps its namespace's closed workflows. */
const RETENTION = "1 day";
/** temporal.api.enums.v1.IndexedValueType: INDEXED_VALUE_TYPE_KEYWORD, _KEYWORD_LIST. */
const INDEXED_VALUE_TYPE = { Keyword: 2, KeywordList: 7 } as const;

export interface TemporalServerBinaries {
  server: string;
  /** temporal-sql-tool: creates the databases and sets up and updates their schemas. */
  sqlTool: string;
}

/** The server and its schema tool of TEMPORAL_SERVER_VERSION, from the cache or built there. */
export async function findTemporalServer(): Promise<TemporalServerBinaries> {
  const dir = join(cliCacheDir, `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  const binaries = { server: join(dir, "server"), sqlTool: join(dir, "sql") };
  const version = await promisify(execFile)(binaries.sqlTool, ["--version"]).catch(() => null);
  if (!version) {
    await goInstall(
      `Temporal's server ${TEMPORAL_SERVER_VERSION}`,
      [
        `${MODULE}/cmd/server@${TEMPORAL_SERVER_VERSION}`,
        `${MODULE}/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}`,
      ],
      dir,
      [
        "unset RELAY_TEMPORAL_SERVER: the stack runs the Temporal CLI's dev server,",
        "set TEMPORAL_ADDRESS (and TEMPORAL_HTTP_ADDRESS) to a running Temporal,",
      ],
    );
  }
  return binaries;
}

/** The Temporal server's databases on the PostgreSQL of `databaseUrl` (Relay's own). */
export function temporalPostgresOf(databaseUrl: string): TemporalPostgres {
  const url = new URL(databaseUrl);
  return {
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: "temporal",
    visibilityDatabase: "temporal_visibility",
  };
}

/**
 * Creates each database with its schema on first use, and updates the schema to this server
 * version's on every start (a no-op when it is current), as Temporal's schema tool is meant to
 * be run before a server upgrade. The schemas are those embedded in the tool.
 */
async function setUpTemporalDatabases(sqlTool: string, postgres: TemporalPostgres): Promise<void> {
  const run = (database: string, args: string[]) =>
    promisify(execFile)(
      sqlTool,
      [
        "--plugin",
        "postgres12",
        "--ep",
        postgres.host,
        "-p",
        String(postgres.port),
        "--db",
        database,
        ...args,
      ],
      // The password in the environment, never on a command line others can read.
      { env: { ...process.env, SQL_USER: postgres.user, SQL_PASSWORD: postgres.password } },
    );
  for (const [database, schema] of [
    [postgres.database, "postgresql/v12/temporal"],
    [postgres.visibilityDatabase, "postgresql/v12/visibility"],
  ] as const) {
    const created = await run(database, ["create-database"]).then(
      () => true,
      (error: { stdout?: string; stderr?: string; message: string }) => {
        if (`${error.stdout}${error.stderr}`.includes("already exists")) return false;
        throw new StartError(`Creating Temporal's database ${database} failed: ${error.message}`);
      },
    );
    // Versioning tables at 0.0; the update below applies every versioned step from there.
    if (created) await run(database, ["setup-schema", "-v", "0.0"]);
    await run(database, ["update-schema", "--schema-name", schema]);
  }
}

export interface TemporalServerOptions {
  postgres: TemporalPostgres;
  /**
   * Server processes in the cluster (1 unless given): each runs every service on ports of its
   * own, they find each other through the membership table in PostgreSQL, and clients reach
   * their frontends through one balancer on `ports` (./tcp-balancer.ts).
   */
  nodes?: number;
  dynamicConfig?: DynamicConfig;
  /** The frontend serves gRPC and its HTTP API over TLS with this certificate. */
  tls?: TemporalServerTls | undefined;
  output?: WriteStream | "inherit";
}

/**
 * Temporal's own server with its config files under `dir`, ready once the namespace and Relay's
 * search attributes are there: one process, or (`nodes`) a cluster of them behind a balancer. A
 * start again (a supervised restart) runs the same files: its state is in PostgreSQL.
 */
export async function startTemporalServer(
  binaries: TemporalServerBinaries,
  dir: string,
  ports: TemporalPorts,
  options: TemporalServerOptions,
): Promise<RunningTemporal> {
  await mkdir(dir, { recursive: true });
  await setUpTemporalDatabases(binaries.sqlTool, options.postgres);
  const dynamicConfigPath = join(dir, "temporal-dynamic-config.yaml");
  await writeFile(
    dynamicConfigPath,
    dynamicConfigFile(options.dynamicConfig ?? temporalDynamicConfig),
  );
  const nodes = options.nodes ?? 1;
  // A cluster's nodes serve on ports of their own; the balancer takes the clients' ports.
  const frontends: { grpc: number; http: number }[] =
    nodes === 1
      ? [ports]
      : await Promise.all(
          Array.from({ length: nodes }, async () => {
            const [grpc, http] = (await freeLowPorts(2)) as [number, number];
            return { grpc, http };
          }),
        );
  const started: ManagedProcess[] = [];
  const balancers: Balancer[] = [];
  const stop = async () => {
    await Promise.all(balancers.map((b) => b.close()));
    await Promise.all(started.map((node) => node.stop()));
  };
  const address = `127.0.0.1:${ports.grpc}`;
  const scheme = options.tls ? "https" : "http";
  try {
    // One at a time: the first registers the namespace, the next joins a cluster that has it.
    for (const [i, frontend] of frontends.entries()) {
      const node = await serverNode(binaries, dir, i, frontend, dynamicConfigPath, options);
      started.push(node);
      await node.start(120_000);
      if (i === 0) {
        await registerRelay(
          await temporalConnectionOptions({
            TEMPORAL_ADDRESS: `127.0.0.1:${frontend.grpc}`,
            TEMPORAL_TLS_CA: options.tls?.caFile,
          }),
        );
      }
    }
    if (nodes > 1) {
      balancers.push(
        await startBalancer(
          ports.grpc,
          frontends.map((f) => f.grpc),
        ),
        await startBalancer(
          ports.http,
          frontends.map((f) => f.http),
        ),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    address,
    httpAddress: `${scheme}://127.0.0.1:${ports.http}`,
    uiUrl: null,
    process: started[0] as ManagedProcess,
    ...(nodes > 1 && {
      nodes: started,
      nodeHttpAddresses: frontends.map((f) => `${scheme}://127.0.0.1:${f.http}`),
    }),
    stop,
  };
}

/**
 * One server process: every service, its frontend on `frontend`, the others on free ports. The
 * first node's config is `temporal-server.yaml` (what bench/fault-cluster.ts finds it by), the
 * next ones' `temporal-server-{n}.yaml`.
 */
async function serverNode(
  binaries: TemporalServerBinaries,
  dir: string,
  index: number,
  frontend: { grpc: number; http: number },
  dynamicConfigPath: string,
  options: TemporalServerOptions,
): Promise<ManagedProcess> {
  // The services' own ports, which no client of Temporal's dials.
  const [
    history,
    matching,
    worker,
    frontendMembership,
    historyMembership,
    matchingMembership,
    workerMembership,
  ] = (await freeLowPorts(7)) as [number, number, number, number, number, number, number];
  const configPath = join(
    dir,
    index === 0 ? "temporal-server.yaml" : `temporal-server-${index + 1}.yaml`,
  );
  const config = temporalServerConfig({
    postgres: options.postgres,
    dynamicConfigPath,
    tls: options.tls,
    nodes: options.nodes,
    ports: {
      frontend: { ...frontend, membership: frontendMembership },
      history: { grpc: history, membership: historyMembership },
      matching: { grpc: matching, membership: matchingMembership },
      worker: { grpc: worker, membership: workerMembership },
    },
  });
  await writeFile(configPath, toYaml(config), { mode: 0o600 });
  const httpAddress = `${options.tls ? "https" : "http"}://127.0.0.1:${frontend.http}`;
  const tlsFetch = options.tls ? await caFetch(options.tls.caFile) : fetch;
  return new ManagedProcess(
    {
      name: index === 0 ? "temporal" : `temporal-${index + 1}`,
      command: [binaries.server, "--config-file", configPath, "--allow-no-auth", "start"],
      env: {},
      serves: async () => {
        const res = await tlsFetch(`${httpAddress}/api/v1/system-info`);
        await res.body?.cancel();
        return res.ok;
      },
    },
    options.output ?? "inherit",
  );
}

/** A fetch that trusts the CA in `caFile` alone (the HTTP API's certificate is signed by it). */
async function caFetch(caFile: string): Promise<typeof fetch> {
  const dispatcher = new Agent({ connect: { ca: await readFile(caFile, "utf8") } });
  return ((input: string) => undiciFetch(input, { dispatcher })) as unknown as typeof fetch;
}

/**
 * The namespace and Relay's search attributes, each created unless it exists: what
 * `temporal operator namespace create` and `search-attribute create` do, through the same API.
 */
async function registerRelay(options: ConnectionOptions): Promise<void> {
  const connection = await Connection.connect(options);
  try {
    await connection.workflowService
      .registerNamespace({
        namespace: NAMESPACE,
        workflowExecutionRetentionPeriod: msToTs(RETENTION),
      })
      .catch((error: unknown) => {
        // ALREADY_EXISTS: registered at an earlier start.
        if (!(isGrpcServiceError(error) && error.code === 6)) throw error;
      });
    const { customAttributes } = await connection.operatorService.listSearchAttributes({
      namespace: NAMESPACE,
    });
    const missing = Object.values(searchAttributes).filter((name) => !customAttributes?.[name]);
    if (missing.length > 0) {
      await connection.operatorService.addSearchAttributes({
        namespace: NAMESPACE,
        searchAttributes: Object.fromEntries(
          missing.map((name) => [name, INDEXED_VALUE_TYPE[searchAttributeType(name)]]),
        ),
      });
    }
  } finally {
    await connection.close();
  }
}
