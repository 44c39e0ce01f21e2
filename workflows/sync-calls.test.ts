import { createServer } from "node:http";
import { request } from "undici";
import { afterEach, expect, test } from "vitest";
import type { SyncOutcome } from "../core/delivery.ts";
import { ProjectSlots } from "../core/project-slots.ts";
import { SyncAnswers, type SyncCallsOptions, syncCallsRoute } from "./sync-calls.ts";

const TOKEN = "t".repeat(32);
const call = {
  requestId: "req_1",
  project: "acme",
  line: "v1",
  endpoint: "hook",
  ownsStatus: true,
  target: { id: "tgt_1", timeoutSeconds: 1 },
};
const fromResult: SyncOutcome = { kind: "refused" };
const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** The route on a listener of its own, its start and result as given. */
async function listener(start: SyncCallsOptions["start"], answers = new SyncAnswers()) {
  const results: string[] = [];
  const route = syncCallsRoute({
    edgeToken: TOKEN,
    slots: new ProjectSlots({ slots: 10, perProject: 10 }),
    answers,
    start,
    result: async (workflowId) => {
      results.push(workflowId);
      return fromResult;
    },
    observeStart: () => {},
    logError: () => {},
  });
  const server = createServer((req, res) => route(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => server.close());
  const hand = async () => {
    const response = await request(
      `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/sync-calls`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(call),
      },
    );
    return { status: response.statusCode, body: await response.body.json() };
  };
  return { hand, results };
}

test("the activity's answer here answers the call, and no result is asked for", async () => {
  const answers = new SyncAnswers();
  const answered: SyncOutcome = { kind: "busy" };
  const { hand, results } = await listener(async (_, workflowId) => {
    setTimeout(() => answers.settle(workflowId, answered), 10);
    return true;
  }, answers);
  expect(await hand()).toEqual({ status: 200, body: answered });
  expect(results).toEqual([]);
});

test("an eager start whose task never ran here is answered by the workflow's result", async () => {
  const { hand, results } = await listener(async () => true);
  expect(await hand()).toEqual({ status: 200, body: fromResult });
  expect(results).toEqual(["req_1"]);
}, 20_000);

test("a start that was not eager, or an activity that failed here, is answered by the result, asked once", async () => {
  const notEager = await listener(async () => false);
  expect(await notEager.hand()).toEqual({ status: 200, body: fromResult });
  expect(notEager.results).toEqual(["req_1"]);

  const answers = new SyncAnswers();
  const failedHere = await listener(async (_, workflowId) => {
    setTimeout(() => answers.settle(workflowId, undefined), 10);
    return true;
  }, answers);
  expect(await failedHere.hand()).toEqual({ status: 200, body: fromResult });
  expect(failedHere.results).toEqual(["req_1"]);
});
