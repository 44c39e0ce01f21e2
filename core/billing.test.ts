import { describe, expect, test } from "vitest";
import {
  type CallHolds,
  deliveryCredits,
  deliveryHolds,
  fittingCalls,
  holdKey,
  isMetered,
  StreamMeter,
} from "./billing.ts";

describe("deliveryCredits: max(1, ceil(bytes / 64 KiB)) per delivery", () => {
  test.each([
    [0, 1],
    [1, 1],
    [65_536, 1],
    [65_537, 2],
    [5 * 1024 * 1024, 80],
  ])("%i bytes cost %i", (bytes, credits) => {
    expect(deliveryCredits(bytes)).toBe(credits);
  });

  test("three targets, or a live target and its mirror, each pay for themselves", () => {
    expect([0, 0, 0].map(deliveryCredits).reduce((a, b) => a + b)).toBe(3);
    expect(2 * deliveryCredits(70_000)).toBe(4);
  });
});

test("free-tier live traffic is unmetered; test traffic and paid plans are", () => {
  expect(isMetered("free", "live")).toBe(false);
  expect(isMetered("free", "test")).toBe(true);
  expect(isMetered("paid", "live")).toBe(true);
});

test("a call holds each delivery's charge by its body; a stream, billed by what it sends back, 1", () => {
  const targets = [
    { id: "a", deliveryMode: "async" as const },
    { id: "m", deliveryMode: "async" as const },
    { id: "s", deliveryMode: "sync" as const },
    { id: "x", deliveryMode: "stream" as const },
  ];
  expect(deliveryHolds(targets, 70_000)).toEqual([
    { targetId: "a", credits: 2 },
    { targetId: "m", credits: 2 },
    { targetId: "s", credits: 2 },
    { targetId: "x", credits: 1 },
  ]);
  expect(deliveryHolds([], 70_000)).toEqual([]);
});

describe("StreamMeter", () => {
  const billed = (contentType: string | null, chunks: string[]) => {
    const meter = new StreamMeter(contentType);
    for (const chunk of chunks) meter.add(new TextEncoder().encode(chunk));
    return meter.finish();
  };
  const bytes = (...chunks: string[]) => billed("text/event-stream", chunks);

  test("counts events, not heartbeats", () => {
    expect(bytes("data: one\n\n: heartbeat\n\ndata: two\n\n")).toBe(
      bytes("data: one\n\ndata: two\n\n"),
    );
    expect(bytes("data: one\n\n")).toBe(11);
  });

  test("a heartbeat split across chunks is still free; a cut stream pays for what arrived", () => {
    expect(bytes("data: a\n\n:", " ping\n", "\ndata: b\n\n")).toBe(bytes("data: a\n\ndata: b\n\n"));
    expect(bytes("data: partial")).toBe(13);
  });

  test("a plain chunked (non-SSE) body is counted whole", () => {
    expect(bytes('{"a":', "1}")).toBe(7);
  });

  test("only an event stream has heartbeats: `:` lines of any other body are billed", () => {
    const lines = [":".repeat(99), "\n\n", "x\n"];
    expect(billed("application/octet-stream", lines)).toBe(103);
    expect(billed(null, lines)).toBe(103);
    expect(billed("text/event-stream; charset=utf-8", lines)).toBe(2);
  });
});

describe("fittingCalls: a batch's calls decided in order, as separate reservations would be", () => {
  const call = (requestId: string, ...credits: number[]): CallHolds => ({
    requestId,
    holds: credits.map((c, i) => ({ targetId: `t${i}`, credits: c })),
  });
  const none = new Set<string>();

  test("each call fits in what the calls before it left; one that does not takes nothing", () => {
    const calls = [call("a", 2), call("b", 3), call("c", 1), call("d", 1, 1)];
    expect(fittingCalls(4, calls, none)).toEqual({
      fits: [true, false, true, false],
      holds: [
        { requestId: "a", targetId: "t0", credits: 2 },
        { requestId: "c", targetId: "t0", credits: 1 },
      ],
    });
  });

  test("all or none per call: two deliveries that fit only one between them hold nothing", () => {
    expect(fittingCalls(1, [call("a", 1, 1), call("b", 1)], none).fits).toEqual([false, true]);
  });

  test("a pool with exactly enough takes every call; one more is refused", () => {
    const calls = Array.from({ length: 5 }, (_, n) => call(`r${n}`, 1));
    expect(fittingCalls(4, calls, none).fits).toEqual([true, true, true, true, false]);
  });

  test("a repeat holds nothing again for a delivery held or charged, and then always fits", () => {
    const taken = new Set([holdKey("a", "t0")]);
    expect(fittingCalls(0, [call("a", 5)], taken)).toEqual({ fits: [true], holds: [] });
    // Only its other delivery is new: that one must fit.
    expect(fittingCalls(1, [call("a", 5, 1)], taken)).toEqual({
      fits: [true],
      holds: [{ requestId: "a", targetId: "t1", credits: 1 }],
    });
    expect(fittingCalls(0, [call("a", 5, 1)], taken).fits).toEqual([false]);
  });

  test("a repeat within the batch finds the hold the call before it took", () => {
    const { fits, holds } = fittingCalls(1, [call("a", 1), call("a", 1)], none);
    expect(fits).toEqual([true, true]);
    expect(holds).toHaveLength(1);
  });

  test("a pool that never had credits fits only calls that add nothing", () => {
    expect(fittingCalls(null, [call("a", 1), { requestId: "b", holds: [] }], none).fits).toEqual([
      false,
      true,
    ]);
  });

  test("an overdrawn pool (a stream sent back more than it held) fits nothing new", () => {
    expect(fittingCalls(-3, [call("a", 1)], none)).toEqual({ fits: [false], holds: [] });
  });
});
