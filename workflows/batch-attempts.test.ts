import { expect, test } from "vitest";
import { ProjectSlots } from "../core/project-slots.ts";
import { delivery, target } from "../test/workflow-worker.ts";
import { type BatchAttemptDeps, firstAttemptsOfBatch } from "./batch-attempts.ts";

test("a batch's first attempts run again (their workflow task lost) deliver nothing the log shows delivered", async () => {
  const origin = target("origin");
  const [before, fresh] = [delivery([origin]), delivery([origin])];
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
  const firsts = await firstAttemptsOfBatch(deps, "acme", [before, fresh]);
  expect(attempted).toEqual([fresh.requestId]);
  expect(firsts).toEqual([{ settled: "delivered" }, { settled: "delivered" }]);
});
