import { expect, test } from "vitest";
import { ProjectSlots } from "../core/project-slots.ts";
import { delivery, target } from "../test/workflow-worker.ts";
import {
  type BatchAttemptDeps,
  firstAttemptsOfBatch,
  releasedAttemptsOfBatch,
} from "./batch-attempts.ts";

const origin = target("origin");

/** A batch's attempts where `before` was delivered already; each attempt made is noted. */
function attemptsWhere(before: { requestId: string }) {
  const attempted: string[] = [];
  const deps: BatchAttemptDeps = {
    async attempt(request) {
      attempted.push(request.requestId);
      return { kind: "delivered", status: 200, settled: "delivered" };
    },
    settle: async () => "delivered",
    deliveredBefore: async () => new Map([[`${before.requestId} ${origin.id}`, 204]]),
    slots: new ProjectSlots({ slots: 10, perProject: 10 }),
    lanes: {
      claim: async () => ({}),
      leave: async () => {},
    },
  };
  return { deps, attempted };
}

test("a batch's first attempts run again (their workflow task lost) deliver nothing the log shows delivered", async () => {
  const [before, fresh] = [delivery([origin]), delivery([origin])];
  const { deps, attempted } = attemptsWhere(before);
  const firsts = await firstAttemptsOfBatch(deps, "acme", [before, fresh]);
  expect(attempted).toEqual([fresh.requestId]);
  expect(firsts).toEqual([{ settled: "delivered" }, { settled: "delivered" }]);
});

test("a batch's later attempts (a retry, a wait for room) run again deliver nothing the log shows delivered", async () => {
  const [before, fresh] = [delivery([origin]), delivery([origin])];
  const { deps, attempted } = attemptsWhere(before);
  const again = [before, fresh].map((request) => ({
    request,
    targetIds: [origin.id],
    timed: [origin.id],
  }));
  const verdicts = await releasedAttemptsOfBatch(
    { ...deps, holdAgain: async () => {} },
    "acme",
    again,
  );
  expect(attempted).toEqual([fresh.requestId]);
  expect(verdicts.map(([v]) => v?.kind)).toEqual(["delivered", "delivered"]);
});
