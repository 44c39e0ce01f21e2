import { expect, test } from "vitest";
import { type Bucket, takeToken } from "./rate-limit.ts";
import {
  currentFraction,
  demandPerSecond,
  type EdgeDemand,
  fallbackFraction,
  limitShare,
  SHARE_EXCHANGE_MS,
  SHARE_FLOOR,
  SHARE_TTL_MS,
  shareOf,
} from "./rate-shares.ts";

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

test("demand is the calls that reached the decision, taken or refused, per second", () => {
  expect(demandPerSecond({ accepted: 3, refused: 7, intervalMs: 500 })).toBe(20);
  expect(demandPerSecond({ accepted: 1, refused: 0, intervalMs: 0 })).toBe(1000);
});

test("shares follow demand above an equal floor, and the counted edges' shares sum to 1", () => {
  const counted: EdgeDemand[] = [
    { edgeId: "a", perSecond: 30 },
    { edgeId: "b", perSecond: 10 },
    { edgeId: "c", perSecond: 0 },
  ];
  const shares = counted.map((edge) => shareOf(edge.edgeId, counted, 1));
  expect(sum(shares)).toBeCloseTo(1, 12);
  expect(shares[0]).toBeCloseTo(SHARE_FLOOR / 3 + (1 - SHARE_FLOOR) * 0.75, 12);
  expect(shares[2]).toBeCloseTo(SHARE_FLOOR / 3, 12);
  // Equal demand, or none reported, is an equal split.
  const idle = counted.map((edge) => ({ ...edge, perSecond: 0 }));
  expect(shareOf("b", idle, 1)).toBeCloseTo(1 / 3, 12);
  const even = counted.map((edge) => ({ ...edge, perSecond: 8 }));
  expect(shareOf("b", even, 1)).toBeCloseTo(1 / 3, 12);
});

test("an edge the split does not count yet gets the fallback of one edge more", () => {
  expect(shareOf("d", [{ edgeId: "a", perSecond: 5 }], 1)).toBe(1 / 2);
});

test("a share grows at most by half from one exchange to the next", () => {
  // The first edge to report a busy endpoint, while two others still apply 1/3 each.
  expect(shareOf("a", [{ edgeId: "a", perSecond: 50 }], 1 / 3)).toBeCloseTo(1 / 2, 12);
  expect(shareOf("a", [{ edgeId: "a", perSecond: 50 }], 2 / 3)).toBe(1);
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
 * second at staggered moments; returns the calls accepted in each second of `seconds`.
 */
function simulate(perEdge: number, seconds: number) {
  const limit = { requestsPerSecond: 10, burst: 20 };
  const edges = ["a", "b", "c"].map((edgeId, i) => ({
    edgeId,
    phaseMs: i * 370,
    bucket: undefined as Bucket | undefined,
    held: undefined as { fraction: number; receivedAtMs: number } | undefined,
    counts: { accepted: 0, refused: 0, sinceMs: 0 },
  }));
  const reported = new Map<string, { perSecond: number; atMs: number }>();
  const acceptedPerSecond = Array.from({ length: seconds }, () => 0);
  const stepMs = 1000 / perEdge;
  for (let nowMs = 0; nowMs < seconds * 1000; nowMs += stepMs / 3) {
    const edge = edges[Math.round(nowMs / (stepMs / 3)) % 3];
    if (!edge) continue;
    for (const e of edges) {
      if (nowMs >= e.phaseMs && nowMs - e.counts.sinceMs >= SHARE_EXCHANGE_MS) {
        const { accepted, refused, sinceMs } = e.counts;
        const perSecond = demandPerSecond({ accepted, refused, intervalMs: nowMs - sinceMs });
        reported.set(e.edgeId, { perSecond, atMs: nowMs });
        const counted = [...reported].map(([edgeId, r]) => ({ edgeId, perSecond: r.perSecond }));
        const applied = currentFraction(e.held, 3, nowMs);
        e.held = { fraction: shareOf(e.edgeId, counted, applied), receivedAtMs: nowMs };
        e.counts = { accepted: 0, refused: 0, sinceMs: nowMs };
      }
    }
    const fraction = currentFraction(edge.held, 3, nowMs);
    const decision = takeToken(edge.bucket, limitShare(limit, fraction), nowMs);
    edge.bucket = decision.bucket;
    if (decision.allowed) {
      edge.counts.accepted++;
      const second = Math.floor(nowMs / 1000);
      acceptedPerSecond[second] = (acceptedPerSecond[second] ?? 0) + 1;
    } else {
      edge.counts.refused++;
    }
  }
  return acceptedPerSecond;
}

test("three staggered edges pushed past the limit accept R x T + B over T, within 5%", () => {
  const perSecond = simulate(20, 30);
  for (let from = 0; from + 10 <= 30; from++) {
    const window = sum(perSecond.slice(from, from + 10));
    expect(window).toBeLessThanOrEqual((10 * 10 + 20) * 1.05);
    expect(window).toBeGreaterThanOrEqual(10 * 10 * 0.95);
  }
  expect(sum(perSecond.slice(0, 10))).toBeGreaterThanOrEqual((10 * 10 + 20) * 0.95);
});
