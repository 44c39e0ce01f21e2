/**
 * The Temporal the stack runs is the one RELAY_TEMPORAL_SERVER chose: the CLI's dev server on
 * SQLite with one history shard by default; Temporal's own server on PostgreSQL with 4 shards
 * under `postgres` (npm run test:cluster), as two nodes of one cluster under `cluster`, Relay's
 * search attributes registered on each; and on its own server, Relay's dynamic config known to
 * it and task queue fairness at work.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client, Connection } from "@temporalio/client";
import { NativeConnection } from "@temporalio/worker";
import postgres from "postgres";
import { afterAll, expect, test } from "vitest";
import { searchAttributes, searchAttributeType } from "../core/temporal.ts";
import { BACKLOG, victimPlaces } from "../dev/fairness-probe.ts";
import { dynamicConfigFile, temporalDynamicConfig } from "../dev/temporal-config.ts";
import { findTemporalServer, TEMPORAL_SERVER_VERSION } from "../dev/temporal-server.ts";
import { stack } from "./helpers.ts";

const connection = await Connection.connect({ address: stack().temporalAddress });
afterAll(() => connection.close());
const onOwnServer = stack().temporalServer !== "dev";

test("Temporal keeps its state where the stack's switch says", async () => {
  const info = await connection.workflowService.getClusterInfo({});
  const expected = onOwnServer
    ? {
        persistenceStore: "postgres12",
        visibilityStore: "postgres12",
        historyShardCount: 4,
        serverVersion: TEMPORAL_SERVER_VERSION.slice(1),
      }
    : { persistenceStore: "sqlite", historyShardCount: 1 };
  expect(info).toMatchObject(expected);
});

test("Relay's search attributes are registered, as keywords and the batch's keyword list", async () => {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({
    namespace: "default",
  });
  for (const name of Object.values(searchAttributes)) {
    // temporal.api.enums.v1.IndexedValueType: INDEXED_VALUE_TYPE_KEYWORD, _KEYWORD_LIST
    expect(customAttributes?.[name], name).toBe(searchAttributeType(name) === "Keyword" ? 2 : 7);
  }
});

test.runIf(onOwnServer)("the server knows every key of Relay's dynamic config", async () => {
  const dir = await mkdtemp(join(tmpdir(), "relay-dynamic-config-"));
  try {
    const file = join(dir, "dynamic-config.yaml");
    await writeFile(file, dynamicConfigFile(temporalDynamicConfig));
    const { server } = await findTemporalServer();
    const { stdout, stderr } = await promisify(execFile)(server, ["validate-dynamic-config", file]);
    const output = `${stdout}${stderr}`;
    expect(output).not.toMatch(/unknown|error|warn/i);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.runIf(onOwnServer)(
  "with Relay's dynamic config, this server hands a project's tasks out in turn with another's backlog",
  async () => {
    const native = await NativeConnection.connect({ address: stack().temporalAddress });
    try {
      const places = await victimPlaces(
        new Client({ connection }),
        native,
        `fairness-${Date.now().toString(36)}`,
      );
      // First come, first served would put them last (100th to 102nd).
      expect(Math.max(...places)).toBeLessThan(BACKLOG / 2);
    } finally {
      await native.close();
    }
  },
  180_000,
);

test.runIf(stack().temporalServer === "cluster")(
  "as a cluster, two server nodes each run every service, found through the membership table",
  async () => {
    const sql = postgres(stack().databaseUrl.replace(/\/[^/?]*(\?|$)/, "/temporal$1"), { max: 1 });
    try {
      // temporal's membership roles: 1 frontend, 2 history, 3 matching, 4 worker.
      const live = await sql<{ role: number; hosts: number }[]>`
        select role, count(distinct host_id)::int as hosts from cluster_membership
        where record_expiry > now() group by role order by role`;
      expect(live).toEqual([1, 2, 3, 4].map((role) => ({ role, hosts: 2 })));
    } finally {
      await sql.end();
    }
  },
);
