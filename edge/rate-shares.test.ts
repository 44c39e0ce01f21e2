import { expect, test } from "vitest";
import { SHARE_TTL_MS } from "../core/rate-shares.ts";
import type { ControlPlane } from "./control.ts";
import { RateShares } from "./rate-shares.ts";

type Report = Parameters<ControlPlane["exchangeRateShares"]>[1];

/** A control plane that records each report and answers `fraction` for every endpoint. */
function sharing(answer: { fraction: number; liveEdges: number }) {
  const reports: Report[] = [];
  let failing = false;
  const control: Pick<ControlPlane, "exchangeRateShares"> = {
    async exchangeRateShares(_, report) {
      if (failing) throw new Error("unreachable");
      reports.push(report);
      return {
        fractions: report.map(() => answer.fraction),
        liveEdges: answer.liveEdges,
      };
    },
  };
  return {
    control,
    reports,
    fail: (on: boolean) => {
      failing = on;
    },
  };
}

const hook = { project: "acme", line: "v1", path: "hook" };
const id = "acme/v1/hook";

test("reports each endpoint's decisions since the first of them, and applies the share answered", async () => {
  let now = 1_000;
  const plane = sharing({ fraction: 0.25, liveEdges: 3 });
  const shares = new RateShares({ control: plane.control, edgeId: "e", now: () => now });
  await shares.exchange();
  // Before any share: 1/N of the live edges the control plane counted.
  expect(shares.fraction(id, now)).toBeCloseTo(1 / 3, 12);
  shares.count(id, hook, true);
  shares.count(id, hook, false);
  now += 1_000;
  await shares.exchange();
  expect(plane.reports[1]).toEqual([{ ...hook, accepted: 1, refused: 1, intervalMs: 1_000 }]);
  expect(shares.fraction(id, now)).toBe(0.25);
  // A share not renewed goes stale: back to 1/N, never the whole limit.
  expect(shares.fraction(id, now + SHARE_TTL_MS)).toBeCloseTo(1 / 3, 12);
});

test("a report the control plane does not answer keeps its counts for the next one", async () => {
  let now = 0;
  const plane = sharing({ fraction: 0.5, liveEdges: 2 });
  const shares = new RateShares({ control: plane.control, edgeId: "e", now: () => now });
  await shares.exchange();
  shares.count(id, hook, true);
  plane.fail(true);
  now = 1_000;
  await expect(shares.exchange()).rejects.toThrow("unreachable");
  shares.count(id, hook, false);
  plane.fail(false);
  now = 2_000;
  await shares.exchange();
  expect(plane.reports.at(-1)).toEqual([{ ...hook, accepted: 1, refused: 1, intervalMs: 2_000 }]);
});

test("a report carries the busiest endpoints first, up to its cap", async () => {
  const plane = sharing({ fraction: 0.5, liveEdges: 2 });
  const shares = new RateShares({ control: plane.control, edgeId: "e", maxReported: 1 });
  shares.count("acme/v1/quiet", { ...hook, path: "quiet" }, true);
  for (let i = 0; i < 3; i++) shares.count(id, hook, false);
  await shares.exchange();
  expect(plane.reports[0]?.map((d) => d.path)).toEqual(["hook"]);
});
