import { describe, expect, it } from "vitest";
import { type KindResult, readings } from "../bench/shapes-report.ts";

/** A stretch that delivered `perSecond` at `ms` of the stack's CPU per delivery (all in Postgres). */
const stretch = (name: string, perSecond: number, ms: number): KindResult => ({
  name,
  calls: 100,
  refused: 0,
  deliveries: 100,
  owed: 100,
  lost: 0,
  duplicates: 0,
  outOfOrder: 0,
  callMs: [1, 2],
  deliveredPerSecond: perSecond,
  drainSeconds: 0,
  cpuMs: { edge: 0, control: 0, worker: 0, temporal: 0, postgres: 100 * ms },
  workflows: { batches: 0, requests: 0, other: 0 },
});

describe("bench:shapes readings", () => {
  it("reads each kind against the mean of the plain stretches just before and after it", () => {
    const plains = [stretch("plain", 1000, 1), stretch("plain", 600, 3), stretch("plain", 400, 5)];
    const kinds = [stretch("idempotent", 400, 4), stretch("fan-out", 250, 6)];
    const read = readings(plains, kinds);
    expect(read.map((r) => [r.result.name, r.plainPerSecond, r.plainMs])).toEqual([
      ["plain", 800, 2],
      ["idempotent", 800, 2],
      ["fan-out", 500, 4],
    ]);
  });
});
