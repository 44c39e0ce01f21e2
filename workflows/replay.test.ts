/**
 * Recorded histories of every workflow type replay on today's workflow code without a
 * nondeterminism error: requests queued by an older worker finish on a newer one. Each history is
 * the binary protobuf of `client.workflow.getHandle(id).fetchHistory()` (`History.encode`); binary
 * because the JSON path (`historyFromJSON`) breaks on this install's two copies of protobufjs 8.
 * One recorded before a change to a workflow's commands stays for as long as such a request could
 * still be running (its retry window). To record today's: `RECORD_HISTORIES=1 npx vitest run
 * workflows/deliver-request.test.ts workflows/workflows.test.ts workflows/lanes.test.ts
 * workflows/recoveries.test.ts workflows/schedules.test.ts` (re)writes the histories their
 * runs name (mocked activities; a history holds their answers, so replay needs none). A new workflow needs a history here too.
 * The replay worker has the payload codec, as the worker does: histories recorded before it
 * (plain payloads) and after it (`sealed-*`, sealed with the secret the recording used) both
 * replay, so requests in flight across the upgrade finish.
 */
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import proto from "@temporalio/proto";
import { DefaultLogger, type ReplayResult, Runtime, Worker } from "@temporalio/worker";
import { beforeAll, expect, test } from "vitest";
import { PayloadCipher } from "../core/payload-codec.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import * as workflows from "./workflows.ts";

// The replay worker's state changes at INFO would fill the test output.
Runtime.install({ logger: new DefaultLogger("WARN") });

const dir = fileURLToPath(new URL("./histories/", import.meta.url));
const recorded = (await readdir(dir)).filter((name) => name.endsWith(".bin"));
const histories = await Promise.all(
  recorded.map(async (file) => ({
    workflowId: file,
    history: proto.temporal.api.history.v1.History.decode(await readFile(`${dir}${file}`)),
  })),
);

/** Each history's replay, by file: one replay worker (one bundle of the workflows) for them all. */
const replayed = new Map<string, ReplayResult>();

beforeAll(async () => {
  const replays = Worker.runReplayHistories(
    {
      workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
      // The secret workflows.test.ts records sealed histories with.
      dataConverter: relayDataConverter(await PayloadCipher.fromSecrets(["5e".repeat(32)])),
    },
    histories,
  );
  for await (const result of replays) replayed.set(result.workflowId, result);
}, 120_000);

test.each(recorded)("%s replays", (file) => {
  expect(replayed.has(file)).toBe(true);
  expect(replayed.get(file)?.error).toBeUndefined();
});

test("histories from before the payload codec and sealed ones are both here", () => {
  expect(recorded).toContain("delivered-at-once.bin");
  expect(recorded).toContain("sealed-retried-once.bin");
  expect(recorded).toContain("sealed-sync-answered.bin");
});

test("every workflow type has a recorded history", () => {
  const types = histories.map(
    ({ history }) =>
      history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name,
  );
  expect(Object.keys(workflows).filter((name) => !types.includes(name))).toEqual([]);
});
