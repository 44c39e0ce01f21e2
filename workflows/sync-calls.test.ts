import { createServer } from "node:http";
import { setTimeout as pause } from "node:timers/promises";
import { request } from "undici";
import { afterEach, expect, test } from "vitest";
import type { SyncInput, SyncOutcome } from "../core/delivery.ts";
import { ProjectSlots } from "../core/project-slots.ts";
import { type ClaimedCall, callsWaitedHere, SyncAnswers } from "./sync-answers.ts";
import { type SyncBatch, type SyncCallsOptions, syncCallsRoute } from "./sync-calls.ts";

const TOKEN = "t".repeat(32);
const callOf = (requestId: string) => ({
  requestId,
  project: "acme",
  line: "v1",
  endpoint: "hook",
  ownsStatus: true,
  target: { id: "tgt_1", timeoutSeconds: 1 },
});
const answered: SyncOutcome = { kind: "answered", status: 201, headers: {}, bodyBase64: "" };
const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/**
 * The route on a listener of its own: `start` stands for Temporal and the batch's task, `closed`
 * for the batch's close (never, unless given); a batch lingers `lingerMs` (none, unless given).
 */
async function listener(
  answers: SyncAnswers,
  start: SyncCallsOptions["start"],
  closed: SyncCallsOptions["closed"] = () => new Promise(() => {}),
  lingerMs = 0,
) {
  const logged: string[] = [];
  const route = syncCallsRoute({
    edgeToken: TOKEN,
    slots: new ProjectSlots({ slots: 10, perProject: 10 }),
    lingerMs,
    answers,
    start,
    closed,
    observeStart: () => {},
    logError: (_, message) => logged.push(message),
  });
  const server = createServer((req, res) => route(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => server.close());
  const hand = async (requestId = "req_1") => {
    const response = await request(
      `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/sync-calls`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(callOf(requestId)),
      },
    );
    const body = (await response.body.json()) as { error?: { code: string } };
    return { status: response.statusCode, body };
  };
  return { hand, logged };
}

/** Makes each claimed call with `make`. */
const each = (make: (call: SyncInput) => Promise<SyncOutcome>) => (claimed: ClaimedCall[]) =>
  claimed.map(({ call }) => make(call));

/** A batch's task run here, as the worker's activity runs it, making each call with `make`. */
const runHere =
  (answers: SyncAnswers, make: (call: SyncInput) => Promise<SyncOutcome>) => (batch: SyncBatch) => {
    setTimeout(() => void callsWaitedHere(answers, batch.calls, each(make)), 10);
    return Promise.resolve(true);
  };

test("a call its batch makes here is answered with the target's answer", async () => {
  const answers = new SyncAnswers();
  const { hand } = await listener(
    answers,
    runHere(answers, async () => answered),
  );
  expect(await hand()).toEqual({ status: 200, body: answered });
});

test("calls arriving while a start is in flight go together in the next batch; a lone call goes alone", async () => {
  const answers = new SyncAnswers();
  const batches: string[][] = [];
  const here = runHere(answers, async () => answered);
  let firstStarting = () => {};
  const firstStarted = new Promise<void>((resolve) => {
    firstStarting = resolve;
  });
  const { hand } = await listener(answers, async (batch) => {
    batches.push(batch.calls.map((call) => call.requestId));
    firstStarting();
    await new Promise((resolve) => setTimeout(resolve, 100)); // a slow start: the next ones gather
    return here(batch);
  });
  const first = hand("req_1");
  await firstStarted;
  const rest = await Promise.all(["req_2", "req_3", "req_4"].map((id) => hand(id)));
  expect(await first).toEqual({ status: 200, body: answered });
  expect(rest.map((r) => r.status)).toEqual([200, 200, 200]);
  expect(batches).toEqual([["req_1"], ["req_2", "req_3", "req_4"]]);
  const batch = batches.length;
  await hand("req_5");
  expect(batches.slice(batch)).toEqual([["req_5"]]);
});

test.each([
  [0, 60, [["req_4"], ["req_5"]]],
  [200, 60, [["req_4", "req_5"]]],
  [100, 150, [["req_4"], ["req_5"]]],
])(
  "a batch of several answers its callers as it starts, then waits while their next calls come, each within its linger (%i ms; the second %i ms after the first)",
  async (lingerMs, second, expected) => {
    const answers = new SyncAnswers();
    const batches: string[][] = [];
    const here = runHere(answers, async () => answered);
    const { hand } = await listener(
      answers,
      async (batch) => {
        batches.push(batch.calls.map((call) => call.requestId));
        if (batches.length === 1) await pause(100); // a slow start: req_2 and req_3 gather
        return here(batch);
      },
      undefined,
      lingerMs,
    );
    const first = hand("req_1");
    await pause(20);
    // Two callers, each sending its next call once answered, one sooner than the other.
    const callers = [
      hand("req_2").then(() => pause(5).then(() => hand("req_4"))),
      hand("req_3").then(() => pause(5 + second).then(() => hand("req_5"))),
    ];
    const statuses = (await Promise.all([first, ...callers])).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200]);
    expect(batches).toEqual([["req_1"], ["req_2", "req_3"], ...expected]);
  },
);

test("an eager batch that closed without making the call answers 503, so the edge goes through Temporal; the call is then never made here", async () => {
  const answers = new SyncAnswers();
  let batch: SyncBatch | undefined;
  const made: string[] = [];
  const { hand } = await listener(
    answers,
    async (started) => {
      batch = started;
      return true;
    },
    async () => {}, // closed: its task ran on another worker
  );
  const refused = await hand();
  expect(refused.status).toBe(503);
  expect(refused.body.error?.code).toBe("unavailable");
  // The task comes here after all: nobody waits, so the call is not made.
  const receipts = await callsWaitedHere(
    answers,
    batch?.calls ?? [],
    each(async (call) => {
      made.push(call.requestId);
      return answered;
    }),
  );
  expect(receipts).toEqual(["not waited for here"]);
  expect(made).toEqual([]);
});

test("a batch that did not start eagerly is watched at once, and a call it claimed is answered though it closed", async () => {
  const answers = new SyncAnswers();
  let close = () => {};
  const closing = new Promise<void>((resolve) => {
    close = resolve;
  });
  const { hand } = await listener(
    answers,
    async (batch) => {
      // Matching hands the task back here: the call is claimed, the batch closes, then it answers.
      setTimeout(() => {
        void callsWaitedHere(
          answers,
          batch.calls,
          each(async () => {
            close();
            await new Promise((resolve) => setTimeout(resolve, 50));
            return answered;
          }),
        );
      }, 10);
      return false;
    },
    () => closing,
  );
  expect(await hand()).toEqual({ status: 200, body: answered });
});

test("a call that failed here (its log, say) answers 504 target_timeout and is logged", async () => {
  const answers = new SyncAnswers();
  const { hand, logged } = await listener(
    answers,
    runHere(answers, async () => {
      throw new Error("the worker lost its database");
    }),
  );
  const failed = await hand();
  expect(failed.status).toBe(504);
  expect(failed.body.error?.code).toBe("target_timeout");
  expect(logged).toEqual(["a sync call failed on this worker"]);
});

test("a batch's calls are answered each as it ends: a slow call holds back no other", async () => {
  const answers = new SyncAnswers();
  const slow = answers.expect("req_slow");
  const fast = answers.expect("req_fast");
  let endSlow = (_: SyncOutcome) => {};
  const made = callsWaitedHere(
    answers,
    [callOf("req_slow"), callOf("req_fast")] as unknown as SyncInput[],
    each((call) =>
      call.requestId === "req_slow"
        ? new Promise<SyncOutcome>((resolve) => {
            endSlow = resolve;
          })
        : Promise.resolve(answered),
    ),
  );
  expect(await fast.answer).toEqual({ outcome: answered });
  expect(fast.withdraw()).toBe(false); // claimed: it was made
  endSlow({ kind: "timeout" });
  expect(await slow.answer).toEqual({ outcome: { kind: "timeout" } });
  expect(await made).toEqual(["answered", "answered"]);
});
