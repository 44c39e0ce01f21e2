/**
 * Recorded histories (deliverRequest, recordStream) replay on today's workflow code without a nondeterminism
 * error: requests queued by an older worker finish on a newer one. Each history is the binary
 * protobuf of `client.workflow.getHandle(id).fetchHistory()` (`History.encode`); binary because
 * the JSON path (`historyFromJSON`) breaks on this install's two copies of protobufjs 8. One
 * recorded before a change to a workflow's commands stays for as long as such a request could
 * still be running (its retry window).
 */
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import proto from "@temporalio/proto";
import { DefaultLogger, Runtime, Worker } from "@temporalio/worker";
import { expect, test } from "vitest";

// Each replay starts and stops a worker; its state changes at INFO would fill the test output.
Runtime.install({ logger: new DefaultLogger("WARN") });

const histories = fileURLToPath(new URL("./histories/", import.meta.url));
const recorded = (await readdir(histories)).filter((name) => name.endsWith(".bin"));

test.each(recorded)(
  "%s replays",
  async (file) => {
    const history = proto.temporal.api.history.v1.History.decode(
      await readFile(`${histories}${file}`),
    );
    await expect(
      Worker.runReplayHistory(
        { workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)) },
        history,
      ),
    ).resolves.toBeUndefined();
  },
  60_000,
);
