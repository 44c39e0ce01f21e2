import { expect, test } from "vitest";
import { type Bucket, takeToken } from "./rate-limit.ts";
import {
  currentFraction,
  DEMAND_WINDOW_MS,
  demandPerSecond,
  type EdgeDemand,
  fallbackFraction,
  limitShare,
  SHARE_EXCHANGE_MS,
  SHARE_FLOOR,
  SHARE_TTL_MS,
  shareOf,
  splitEndpoint,
} from "./rate-shares.ts";

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

test("demand is the calls that reached the decision, taken or refused, per second", () => {
  expect(demandPerSecond({ accepted: 3, refused: 7, intervalMs: 500 })).toBe(20);
  expect(demandPerSecond({ accepted: 1, refused: 0, intervalMs: 0 })).toBe(4);
});

/** Each edge's share when every edge of `counted` is established and applies the whole limit. */
const split = (counted: EdgeDemand[]) =>
  counted.map((edge) =>
    shareOf(
      { perSecond: edge.perSecond, established: true },
      counted.filter((other) => other !== edge),
      counted.length,
    ),
  );

test("shares follow demand above an equal floor, and the counted edges' shares sum to 1", () => {
  const counted: EdgeDemand[] = [
    { edgeId: "a", perSecond: 30 },
    { edgeId: "b", perSecond: 10 },
    { edgeId: "c", perSecond: 0 },
  ];
  const shares = split(counted);
  expect(sum(shares)).toBeCloseTo(1, 12);
  expect(shares[0]).toBeCloseTo(SHARE_FLOOR / 3 + (1 - SHARE_FLOOR) * 0.75, 12);
  expect(shares[2]).toBeCloseTo(SHARE_FLOOR / 3, 12);
  // Equal demand, or none reported, is an equal split.
  for (const perSecond of [0, 8]) {
    for (const share of split(counted.map((edge) => ({ ...edge, perSecond })))) {
      expect(share).toBeCloseTo(1 / 3, 12);
    }
  }
});

test("an edge's first report of an endpoint gets at most the fallback", () => {
  // The first edge to report a busy endpoint, while two others still apply 1/3 each.
  const busy = { perSecond: 50 };
  expect(shareOf({ ...busy, established: false }, [], 3)).toBeCloseTo(1 / 3, 12);
  expect(shareOf({ ...busy, established: true }, [], 3)).toBe(1);
  // Its own earlier report makes an edge established; it is not one of the others.
  const before = [{ edgeId: "a", perSecond: 10 }];
  expect(splitEndpoint("a", 20, before, 2)).toBe(1);
  expect(splitEndpoint("b", 20, before, 2)).toBe(1 / 2);
  // Edges the control plane counts beyond the live leases (one just lost its lease) count too.
  const others = [1, 2, 3].map((n) => ({ edgeId: String(n), perSecond: 1 }));
  expect(shareOf({ ...busy, established: false }, others, 2)).toBe(1 / 4);
});

test("without a fresh share an edge takes 1/N of the limit, never the whole while others live", () => {
  expect(fallbackFraction(3)).toBeCloseTo(1 / 3, 12);
  expect(fallbackFraction(0)).toBe(1);
  const held = { fraction: 0.7, receivedAtMs: 1_000 };
  expect(currentFraction(held, 4, 1_000 + SHARE_TTL_MS - 1)).toBe(0.7);
  expect(currentFraction(held, 4, 1_000 + SHARE_TTL_MS)).toBe(1 / 4);
  expect(currentFraction(undefined, 4, 0)).toBe(1 / 4);
});

test("a share of the limit keeps at least one token of burst", () => {
  expect(limitShare({ requestsPerSecond: 9, burst: 30 }, 1 / 3)).toEqual({
    requestsPerSecond: 3,
    burst: 10,
  });
  expect(limitShare({ requestsPerSecond: 1, burst: 2 }, 1 / 3).burst).toBe(1);
});

/**
 * Three edges, each asked `perEdge` calls a second (round robin), exchange their demand every
 * second at staggered moments; returns the calls accepted in each second of `seconds`. During
 * `stall` the caller sends nothing, then all it owes at once (a busy machine's caller).
 */
function simulate(perEdge: number, seconds: number, stall = { fromMs: 0, toMs: 0 }) {
  const limit = { requestsPerSecond: 10, burst: 20 };
  const edges = ["a", "b", "c"].map((edgeId, i) => ({
    edgeId,
    bucket: undefined as Bucket | undefined,
    held: undefined as { fraction: number; receivedAtMs: number } | undefined,
    // Each last reported (nothing) before the calls began, at staggered moments.
    reportedAtMs: i * 370 + 200 - SHARE_EXCHANGE_MS,
    counts: { accepted: 0, refused: 0, firstAtMs: 0 },
  }));
  const reported = new Map<string, { perSecond: number; atMs: number }>();
  const acceptedPerSecond = Array.from({ length: seconds }, () => 0);
  const stepMs = 1000 / perEdge;
  const owed: typeof edges = [];
  for (let nowMs = 0; nowMs < seconds * 1000; nowMs += stepMs / 3) {
    const edge = edges[Math.round(nowMs / (stepMs / 3)) % 3];
    if (!edge) continue;
    for (const e of edges) {
      if (nowMs - e.reportedAtMs >= SHARE_EXCHANGE_MS) {
        const { accepted, refused, firstAtMs } = e.counts;
        const perSecond = demandPerSecond({ accepted, refused, intervalMs: nowMs - firstAtMs });
        const counted = [...reported]
          .filter(([, r]) => nowMs - r.atMs < DEMAND_WINDOW_MS)
          .map(([edgeId, r]) => ({ edgeId, perSecond: r.perSecond }));
        e.held = { fraction: splitEndpoint(e.edgeId, perSecond, counted, 3), receivedAtMs: nowMs };
        reported.set(e.edgeId, { perSecond, atMs: nowMs });
        e.reportedAtMs = nowMs;
        e.counts = { accepted: 0, refused: 0, firstAtMs: nowMs };
      }
    }
    owed.push(edge);
    if (nowMs >= stall.fromMs && nowMs < stall.toMs) continue;
    for (const called of owed.splice(0)) {
      const fraction = currentFraction(called.held, 3, nowMs);
      const decision = takeToken(called.bucket, limitShare(limit, fraction), nowMs);
      called.bucket = decision.bucket;
      if (called.counts.accepted + called.counts.refused === 0) called.counts.firstAtMs = nowMs;
      if (decision.allowed) {
        called.counts.accepted++;
        const second = Math.floor(nowMs / 1000);
        acceptedPerSecond[second] = (acceptedPerSecond[second] ?? 0) + 1;
      } else {
        called.counts.refused++;
      }
    }
  }
  return acceptedPerSecond;
}

test("three staggered edges pushed past the limit accept R x T + B over T, within 5%", () => {
  // The caller stalls for 0.7 s in second 15: windows that end there lack what it owed.
  const perSecond = simulate(20, 30, { fromMs: 15_300, toMs: 16_000 });
  for (let from = 0; from + 10 <= 30; from++) {
    const window = sum(perSecond.slice(from, from + 10));
    expect(window).toBeLessThanOrEqual((10 * 10 + 20) * 1.05);
    if (from + 10 !== 16) expect(window).toBeGreaterThanOrEqual(10 * 10 * 0.95);
  }
  expect(sum(perSecond.slice(0, 10))).toBeGreaterThanOrEqual((10 * 10 + 20) * 0.95);
});
