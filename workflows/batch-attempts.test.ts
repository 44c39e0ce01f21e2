import { expect, test } from "vitest";
import { ProjectSlots } from "../core/project-slots.ts";
import type { TurnGiven } from "../store/lanes.ts";
import { delivery, target } from "../test/workflow-worker.ts";
import {
  type BatchAttemptDeps,
  firstAttemptsOfBatch,
  releasedAttemptsOfBatch,
} from "./batch-attempts.ts";
import type { LaneDeps } from "./batch-lanes.ts";
import type { FirstAttempt } from "./deliveries.ts";
import { TurnHandOffs } from "./turn-hand-offs.ts";

const origin = target("origin");
const mirror = target("mirror");
const BATCH = "batch-1";

/**
 * One lane at `origin`, its requests in `order`, as store/lanes.ts keeps it: a turn given to a
 * parked request is handed to its carrier's listener on this worker (`handOffs`), else told.
 */
function laneOf(order: string[], handOffs = new TurnHandOffs()) {
  const done = new Set<string>();
  const told: string[] = [];
  const carriers = new Map<string, string>();
  const head = () => order.find((id) => !done.has(id));
  const lanes: LaneDeps = {
    claim: async (claims, carrier) =>
      claims.map((c) => {
        carriers.set(c.requestId, carrier);
        return Object.fromEntries(
          c.targetIds.map((t) => [t, head() === c.requestId ? "turn" : "wait"]),
        );
      }),
    listen: (carrier, claims) => handOffs.listen(carrier, claims),
    // Its project's share of long listeners is taken: a wait for a turn lasts a second at most.
    listenLonger: () => null,
    leave: async (leaving, keep) => {
      for (const { requestId } of leaving) done.add(requestId);
      const next = head();
      if (!next) return [];
      const given: TurnGiven = {
        laneId: "lane",
        requestId: next,
        targetId: origin.id,
        workflowId: carriers.get(next) ?? BATCH,
      };
      if (keep(given)) return [given];
      told.push(...handOffs.offer([given]).map((g) => g.requestId));
      return [];
    },
    countWaits: async () => {},
  };
  return { lanes, told };
}

/** A batch's attempts where `before` was delivered already; each attempt made is noted. */
function attemptsWhere(
  before: { requestId: string },
  lanes = laneOf([]).lanes,
  answer = (_requestId: string): FirstAttempt => ({
    kind: "delivered",
    status: 200,
    settled: "delivered",
  }),
) {
  const attempted: string[] = [];
  /** The requests of each settle, by id. */
  const settles: string[][] = [];
  const deps: BatchAttemptDeps = {
    async attempt(request) {
      attempted.push(request.requestId);
      return answer(request.requestId);
    },
    settle: async (settling) => {
      settles.push(settling.map(({ requestId }) => requestId));
      return new Map(settling.map(({ requestId }) => [requestId, "delivered"]));
    },
    triedBefore: async () => (d) =>
      d.requestId === before.requestId && d.target.id === origin.id
        ? { kind: "delivered", status: 204 }
        : undefined,
    slots: new ProjectSlots({ slots: 10, perProject: 10 }),
    lanes,
  };
  return { deps, attempted, settles };
}

test("a batch's first attempts run again (their workflow task lost) deliver nothing the log shows delivered", async () => {
  const [before, fresh] = [delivery([origin]), delivery([origin])];
  const { deps, attempted } = attemptsWhere(before);
  const firsts = await firstAttemptsOfBatch(deps, "acme", BATCH, [before, fresh]);
  expect(attempted).toEqual([fresh.requestId]);
  expect(firsts).toEqual([{ settled: "delivered" }, { settled: "delivered" }]);
});

test("a batch's requests of several targets, ended by their first attempts, are settled together", async () => {
  const [first, second] = [delivery([origin, mirror]), delivery([origin, mirror])];
  const { deps, settles } = attemptsWhere({ requestId: "none" }, undefined, () => ({
    kind: "delivered",
    status: 200,
  }));
  const firsts = await firstAttemptsOfBatch(deps, "acme", BATCH, [first, second]);
  expect(settles).toEqual([[first.requestId, second.requestId]]);
  expect(firsts).toEqual([{ settled: "delivered" }, { settled: "delivered" }]);
});

test("requests a batch could not settle (the log refused the write) go on with their verdicts", async () => {
  const fanOut = delivery([origin, mirror]);
  const { deps } = attemptsWhere({ requestId: "none" }, undefined, () => ({
    kind: "delivered",
    status: 200,
  }));
  const refusing = { ...deps, settle: () => Promise.reject(new Error("the log is down")) };
  const firsts = await firstAttemptsOfBatch(refusing, "acme", BATCH, [fanOut]);
  expect(firsts).toEqual([
    {
      verdicts: [
        { kind: "delivered", status: 200 },
        { kind: "delivered", status: 200 },
      ],
    },
  ]);
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
    BATCH,
    again,
  );
  expect(attempted).toEqual([fresh.requestId]);
  expect(verdicts.map((v) => typeof v !== "string" && v[0]?.kind)).toEqual([
    "delivered",
    "delivered",
  ]);
});

const ordered = (key: string) => ({ ...delivery([origin]), ordering: { laneId: "lane", key } });

test("a contended key's calls in one batch go one after another in one activity; a retry keeps the turn, and those behind it wait", async () => {
  const calls = [1, 2, 3, 4].map(() => ordered("k"));
  const ids = calls.map((c) => c.requestId);
  const { lanes, told } = laneOf(ids);
  const retried = ids[2];
  const { deps, attempted } = attemptsWhere({ requestId: "none" }, lanes, (requestId) =>
    requestId === retried
      ? { kind: "retry", type: "TargetRetry", message: "503", delayMs: 1000 }
      : { kind: "delivered", status: 200, settled: "delivered" },
  );
  const firsts = await firstAttemptsOfBatch(deps, "acme", BATCH, calls);
  expect(attempted).toEqual(ids.slice(0, 3));
  expect(firsts).toEqual([
    { settled: "delivered" },
    { settled: "delivered" },
    { verdicts: [{ kind: "retry", type: "TargetRetry", message: "503", delayMs: 1000 }] },
    { inLane: "waits" },
  ]);
  expect(told).toEqual([]);
});

test("calls behind another batch's head wait in their lane, unattempted; told later, they go in turn", async () => {
  const calls = [1, 2].map(() => ordered("k"));
  const ids = calls.map((c) => c.requestId);
  const { lanes } = laneOf(["elsewhere", ...ids]);
  const { deps, attempted } = attemptsWhere({ requestId: "none" }, lanes);
  expect(await firstAttemptsOfBatch(deps, "acme", BATCH, calls)).toEqual([
    { inLane: "waits" },
    { inLane: "waits" },
  ]);
  expect(attempted).toEqual([]);
  await lanes.leave(
    [{ laneId: "lane", requestId: "elsewhere", targetIds: [origin.id] }],
    () => false,
  );
  const waiting = calls.map((request) => ({ request, targetIds: [origin.id], inLane: true }));
  const later = await releasedAttemptsOfBatch(
    { ...deps, holdAgain: async () => {} },
    "acme",
    BATCH,
    waiting,
  );
  expect(attempted).toEqual(ids);
  expect(later.map((v) => typeof v !== "string" && v[0]?.kind)).toEqual(["delivered", "delivered"]);
});

test("a call behind another batch's running on the same worker is handed its turn by that batch's leave, and goes in the same activity, unsignalled", async () => {
  const [first, second] = [ordered("k"), ordered("k")];
  const { lanes, told } = laneOf([first.requestId, second.requestId]);
  const a = attemptsWhere({ requestId: "none" }, lanes);
  const b = attemptsWhere({ requestId: "none" }, lanes);
  const [firstOf, secondOf] = await Promise.all([
    firstAttemptsOfBatch(a.deps, "acme", "batch-a", [first]),
    firstAttemptsOfBatch(b.deps, "acme", "batch-b", [second]),
  ]);
  expect([firstOf, secondOf]).toEqual([[{ settled: "delivered" }], [{ settled: "delivered" }]]);
  expect([a.attempted, b.attempted]).toEqual([[first.requestId], [second.requestId]]);
  expect(told).toEqual([]);
});

test("a call whose turn comes past a second is handed it while its all-ordered batch's activity holds a long listener's slot; without one, or beside an unordered call, it waits in its lane and is told", async () => {
  const cases = [
    { listensLonger: true, unordered: false },
    { listensLonger: false, unordered: false },
    { listensLonger: true, unordered: true },
  ];
  const outcomes = await Promise.all(
    cases.map(async ({ listensLonger, unordered }) => {
      const [first, second] = [ordered("k"), ordered("k")];
      const { lanes, told } = laneOf([first.requestId, second.requestId]);
      const listeners = new ProjectSlots({ slots: 1, perProject: 1 });
      const b = attemptsWhere(
        { requestId: "none" },
        { ...lanes, listenLonger: () => (listensLonger ? listeners.take("acme") : null) },
      );
      const batch = [second, ...(unordered ? [delivery([origin])] : [])];
      const secondOf = firstAttemptsOfBatch(b.deps, "acme", "batch-b", batch);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await lanes.leave(
        [{ laneId: "lane", requestId: first.requestId, targetIds: [origin.id] }],
        () => false,
      );
      const [answered] = await secondOf;
      return { answered, told: told.length, listenersLeft: listeners.take("acme") !== null };
    }),
  );
  expect(outcomes).toEqual([
    { answered: { settled: "delivered" }, told: 0, listenersLeft: true },
    { answered: { inLane: "waits" }, told: 1, listenersLeft: true },
    { answered: { inLane: "waits" }, told: 1, listenersLeft: true },
  ]);
});
