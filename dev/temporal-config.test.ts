import { expect, test } from "vitest";
import {
  dynamicConfigFile,
  HISTORY_SHARDS,
  temporalServerConfig,
  toYaml,
} from "./temporal-config.ts";

test("toYaml writes maps and lists in block style, scalars as JSON", () => {
  expect(
    toYaml({
      log: { stdout: true, level: "warn" },
      ports: [7233, { grpc: 1, tags: [] }],
      empty: {},
      quoted: 'a: "b"',
    }),
  ).toBe(
    [
      "log:",
      "  stdout: true",
      '  level: "warn"',
      "ports:",
      "  - 7233",
      "  -",
      "    grpc: 1",
      "    tags: []",
      "empty: {}",
      'quoted: "a: \\"b\\""',
      "",
    ].join("\n"),
  );
});

test("the dynamic config file holds each key as one unconstrained value", () => {
  expect(dynamicConfigFile({ "matching.enableFairness": true, "a.b": 1000 })).toBe(
    [
      "matching.enableFairness:",
      "  -",
      "    value: true",
      "a.b:",
      "  -",
      "    value: 1000",
      "",
    ].join("\n"),
  );
});

test("the server config puts persistence and visibility on PostgreSQL with the fixed shards", () => {
  const config = temporalServerConfig({
    postgres: {
      host: "127.0.0.1",
      port: 5433,
      user: "relay",
      password: "pw",
      database: "temporal",
      visibilityDatabase: "temporal_visibility",
    },
    ports: {
      frontend: { grpc: 7233, http: 7243, membership: 1 },
      history: { grpc: 2, membership: 3 },
      matching: { grpc: 4, membership: 5 },
      worker: { grpc: 6, membership: 7 },
    },
    dynamicConfigPath: "/d/dynamic.yaml",
  });
  expect(config).toMatchObject({
    persistence: {
      numHistoryShards: HISTORY_SHARDS,
      datastores: {
        default: { sql: { pluginName: "postgres12", databaseName: "temporal" } },
        visibility: { sql: { databaseName: "temporal_visibility", connectAddr: "127.0.0.1:5433" } },
      },
    },
    services: { frontend: { rpc: { grpcPort: 7233, httpPort: 7243 } } },
    dynamicConfigClient: { filepath: "/d/dynamic.yaml" },
  });
  expect(HISTORY_SHARDS).toBe(4);
  expect(config.global).not.toHaveProperty("tls");
});
