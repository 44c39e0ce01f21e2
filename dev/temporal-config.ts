/**
 * Temporal's own configuration for the dev server that `npm start`, the tests and the bench run
 * (docs/temporal.md says what to set on a real cluster instead). Every key is a server dynamic
 * config key (go.temporal.io/server common/dynamicconfig/constants.go, v1.29 in CLI v1.5.1),
 * passed as `--dynamic-config-value KEY=JSON`. The dev server accepts any key without a word, so
 * `npm run bench` (bench/temporal-ceiling.ts) checks that these take effect.
 */

export type DynamicConfig = Readonly<Record<string, number | boolean>>;

/** Temporal's defaults, as the dev server starts with no values given (the bench's baseline). */
export const temporalDefaults: DynamicConfig = {};

export const temporalDynamicConfig: DynamicConfig = {
  // The transfer queue carries every workflow and activity task from history to matching. Its
  // reader polls the store at most 20 times a second by default, so each task waited ~25 ms on
  // average (36 ms of a bare workflow's 50 ms start to result). 1000 polls/s caps that wait at
  // ~1 ms; a poll still happens only when history has written new tasks.
  "history.transferProcessorMaxPollRPS": 1000,
  // The timer queue fires retry backoffs, activity and workflow-task timeouts: same cap, same
  // reason (a retry due now should not wait up to 50 ms more to be scheduled).
  "history.timerProcessorMaxPollRPS": 1000,
  // The visibility queue writes the search attributes the panel and the Temporal UI list
  // requests by; at 20 polls/s their lists lag and the queue backs up under load.
  "history.visibilityProcessorMaxPollRPS": 1000,
  // One partition per task queue (default 4). Partitions spread a hot queue over matching hosts;
  // the dev server is one host, where a task landing on a partition no poller waits on is
  // forwarded between partitions first.
  "matching.numTaskqueueReadPartitions": 1,
  "matching.numTaskqueueWritePartitions": 1,
  // A workflow task that schedules an activity on its own task queue gets the activity back in
  // the completion's answer when the worker has a free slot: no trip through the transfer
  // queue and matching. Off by default on the server; the TypeScript SDK asks for it.
  "system.enableActivityEagerExecution": true,
  // A sync call handed to a worker is started by that worker asking for eager start: the
  // workflow's first task comes back in the start's answer (workflows/sync-calls.ts). On by
  // default in recent servers; said here, as the cluster's file says it.
  "system.enableEagerWorkflowStart": true,
  // Task queue fairness (a pre-release in v1.29, generally available from v1.31): tasks carry
  // their project as fairness key (core/temporal.ts `fairnessOf`), and matching dispatches the
  // keys in turn, so one project's backlog of thousands does not queue another's task behind it.
  // Fairness runs on the new matcher, which this version still has off by default.
  "matching.useNewMatcher": true,
  "matching.enableFairness": true,
};

/** Relay's configuration less fairness: what fairness is measured and tested against. */
export const {
  "matching.useNewMatcher": _,
  "matching.enableFairness": __,
  ...withoutFairness
} = temporalDynamicConfig;

/**
 * The dev server's SQLite store runs on one connection; WAL keeps readers off the writer, and
 * `synchronous=normal` syncs at checkpoints rather than each commit (a crash of the machine,
 * not of the process, may lose the last commits: fine for a dev store).
 */
export const sqlitePragmas: Readonly<Record<string, string>> = {
  journal_mode: "wal",
  synchronous: "normal",
};

/** The `temporal server start-dev` flags for `config` and the SQLite pragmas. */
export function devServerFlags(config: DynamicConfig): string[] {
  return [
    ...Object.entries(sqlitePragmas).flatMap(([key, value]) => [
      "--sqlite-pragma",
      `${key}=${value}`,
    ]),
    ...Object.entries(config).flatMap(([key, value]) => [
      "--dynamic-config-value",
      `${key}=${JSON.stringify(value)}`,
    ]),
  ];
}

/**
 * A value as YAML, for Temporal's own server's files: maps and lists in block style, each scalar
 * as JSON (a JSON string is a YAML double-quoted scalar). Enough for plain config objects.
 */
export function toYaml(value: unknown, indent = ""): string {
  if (Array.isArray(value)) {
    return value.map((item) => `${indent}-${block(item, `${indent}  `, " ")}`).join("");
  }
  if (value !== null && typeof value === "object") {
    return Object.entries(value)
      .map(([key, item]) => `${indent}${key}:${block(item, `${indent}  `, " ")}`)
      .join("");
  }
  return `${indent}${JSON.stringify(value)}\n`;
}

/** After a key or a dash: a nested map or list on the lines below, a scalar on the same line. */
function block(value: unknown, indent: string, space: string): string {
  if (value !== null && typeof value === "object") {
    const isEmpty = Object.keys(value).length === 0;
    return isEmpty ? ` ${Array.isArray(value) ? "[]" : "{}"}\n` : `\n${toYaml(value, indent)}`;
  }
  return `${space}${JSON.stringify(value)}\n`;
}

/**
 * Temporal's own server reads its dynamic config from a YAML file: each key a list of values
 * with constraints; one unconstrained value each here (every namespace, every task queue).
 */
export function dynamicConfigFile(config: DynamicConfig): string {
  return toYaml(
    Object.fromEntries(Object.entries(config).map(([key, value]) => [key, [{ value }]])),
  );
}

/** Where Temporal's own server keeps its data: databases on one PostgreSQL (v12 or newer). */
export interface TemporalPostgres {
  host: string;
  port: number;
  user: string;
  password: string;
  /** Workflow histories, task queues, shards, cluster membership. */
  database: string;
  /** What lists and counts workflows (the panel's and the Temporal UI's lists). */
  visibilityDatabase: string;
}

/** Every port a one-process Temporal server binds: gRPC and membership per service. */
export interface TemporalServerPorts {
  frontend: { grpc: number; http: number; membership: number };
  history: { grpc: number; membership: number };
  matching: { grpc: number; membership: number };
  worker: { grpc: number; membership: number };
}

/** The frontend's certificate: gRPC and the HTTP API serve TLS with it when given. */
export interface TemporalServerTls {
  certFile: string;
  keyFile: string;
  /** The CA the server's own system worker trusts the frontend by. */
  caFile: string;
}

/**
 * Fixed when the cluster is created: a history shard is the unit of history's ownership and
 * concurrency, and the count can never change after (a production cluster picks 512 or more).
 * Four is enough to have workflows spread over shards, as on a cluster, on this machine.
 */
export const HISTORY_SHARDS = 4;

/**
 * The server config of Temporal's own server on PostgreSQL, all its services in one process on
 * loopback (as `temporal-server start` runs them by default), the dynamic config from
 * `dynamicConfigPath`. As YAML by `toYaml`.
 */
export function temporalServerConfig(options: {
  postgres: TemporalPostgres;
  ports: TemporalServerPorts;
  dynamicConfigPath: string;
  tls?: TemporalServerTls | undefined;
  /** The cluster's nodes: each gets its share of the connections one node would have. */
  nodes?: number;
}): Record<string, unknown> {
  const { postgres, ports } = options;
  const datastore = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: "postgres12",
      databaseName,
      connectAddr: `${postgres.host}:${postgres.port}`,
      connectProtocol: "tcp",
      user: postgres.user,
      password: postgres.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: "1h",
    },
  });
  const rpc = (service: { grpc: number; membership: number; http?: number }) => ({
    rpc: {
      grpcPort: service.grpc,
      membershipPort: service.membership,
      bindOnLocalHost: true,
      ...(service.http && { httpPort: service.http }),
    },
  });
  const { tls } = options;
  return {
    log: { stdout: true, level: "warn" },
    persistence: {
      defaultStore: "default",
      visibilityStore: "visibility",
      numHistoryShards: HISTORY_SHARDS,
      datastores: {
        default: datastore(postgres.database, Math.ceil(20 / (options.nodes ?? 1))),
        visibility: datastore(postgres.visibilityDatabase, Math.ceil(10 / (options.nodes ?? 1))),
      },
    },
    global: {
      membership: { maxJoinDuration: "30s", broadcastAddress: "127.0.0.1" },
      ...(tls && {
        tls: {
          frontend: {
            server: { certFile: tls.certFile, keyFile: tls.keyFile },
            client: { serverName: "localhost", rootCaFiles: [tls.caFile] },
          },
          systemWorker: { client: { serverName: "localhost", rootCaFiles: [tls.caFile] } },
        },
      }),
    },
    services: {
      frontend: rpc(ports.frontend),
      history: rpc(ports.history),
      matching: rpc(ports.matching),
      worker: rpc(ports.worker),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: "active",
      currentClusterName: "active",
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: "frontend",
          rpcAddress: `127.0.0.1:${ports.frontend.grpc}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: "noop" },
    dynamicConfigClient: { filepath: options.dynamicConfigPath, pollInterval: "10s" },
  };
}
