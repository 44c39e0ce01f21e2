import { Code, ConnectError } from "@connectrpc/connect";
import { expect, test } from "vitest";
import type { StreamRecord } from "../core/delivery.ts";
import { streamRecorder } from "./stream-records.ts";

const streamOf = (requestId: string) => ({ requestId }) as StreamRecord;

/** A recorder whose sends answer `outcomes` in turn (then succeed), with no waits between tries. */
function recorderWith(outcomes: (Error | null)[], maxPending?: number) {
  const sent: string[] = [];
  const lost: string[] = [];
  const observed: string[] = [];
  const recordStream = streamRecorder({
    send: async (r) => {
      sent.push(r.requestId);
      const outcome = outcomes.shift();
      if (outcome) throw outcome;
    },
    logError: (fields) => lost.push(String(fields.requestId)),
    observe: (outcome) => observed.push(outcome),
    retryDelaysMs: [0, 0, 0],
    ...(maxPending !== undefined && { maxPending }),
  });
  return { recordStream, sent, lost, observed };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

test("a record the control plane could not take is sent again until it is", async () => {
  const down = new ConnectError("restarting", Code.Unavailable);
  const { recordStream, sent, lost, observed } = recorderWith([down, down, null]);
  recordStream(streamOf("req_1"));
  await settled();
  expect(sent).toEqual(["req_1", "req_1", "req_1"]);
  expect(lost).toEqual([]);
  expect(observed).toEqual(["retried", "retried", "logged"]);
});

test("after the last retry, or when refused, a record is logged as lost", async () => {
  const down = new ConnectError("down", Code.Unavailable);
  const refused = new ConnectError("a stream record needs a key mode", Code.InvalidArgument);
  const retried = recorderWith([down, down, down, down]);
  retried.recordStream(streamOf("req_down"));
  const refusal = recorderWith([refused]);
  refusal.recordStream(streamOf("req_bad"));
  await settled();
  expect([retried.sent.length, retried.lost]).toEqual([4, ["req_down"]]);
  expect(retried.observed).toEqual(["retried", "retried", "retried", "lost"]);
  expect([refusal.sent.length, refusal.lost]).toEqual([1, ["req_bad"]]);
});

test("records waiting are bounded: past the bound a record is lost at once", async () => {
  const { recordStream, sent, lost } = recorderWith([], 2);
  for (const id of ["a", "b", "c"]) recordStream(streamOf(id));
  expect(lost).toEqual(["c"]);
  await settled();
  recordStream(streamOf("d")); // the first two went through: room again
  await settled();
  expect([sent, lost]).toEqual([["a", "b", "d"], ["c"]]);
});
