import { describe, expect, it } from "vitest";
import {
  FIRE_TOKEN_TTL_MS,
  fireToken,
  importFireKey,
  isFireToken,
  isTimeZone,
  parseCron,
  shortestGapMinutes,
  verifyFireToken,
} from "./schedules.ts";

const gap = (expression: string) => {
  const cron = parseCron(expression);
  if ("problem" in cron) throw new Error(cron.problem);
  return shortestGapMinutes(cron);
};

describe("parseCron", () => {
  it("reads the five fields with ranges, steps, lists and names", () => {
    expect(parseCron("*/15 9-17 * JAN-MAR mon-fri")).toEqual({ minutes: [0, 15, 30, 45] });
    expect(parseCron("5,10-12 0 1 * 7")).toEqual({ minutes: [5, 10, 11, 12] });
    expect(parseCron("@hourly")).toEqual({ minutes: [0] });
  });

  it.each([
    ["* * * *", "five fields"],
    ["0 0 * * * 2027", "five fields"],
    ["60 * * * *", "minute field has '60'"],
    ["* 24 * * *", "hour field"],
    ["* * 0 * *", "day of month field"],
    ["5/15 * * * *", "not a value"],
    ["1-2-3 * * * *", "not a value"],
    ["10-5 * * * *", "outside"],
    ["*/0 * * * *", "outside"],
    ["@every 1m", "five fields"],
    ["TZ=UTC 0 * * * *", "five fields"],
    // Names every object inherits are not shorthands.
    ["__proto__", "five fields"],
    ["constructor", "five fields"],
  ])("refuses %s", (expression, problem) => {
    expect(parseCron(expression)).toEqual({ problem: expect.stringContaining(problem) });
  });
});

describe("shortestGapMinutes", () => {
  it("is the shortest step between the minutes, across the hour too", () => {
    expect(gap("* * * * *")).toBe(1);
    expect(gap("*/5 * * * *")).toBe(5);
    expect(gap("0 9 * * *")).toBe(60);
    expect(gap("0,30 * * * *")).toBe(30);
    expect(gap("2,55 9 * * *")).toBe(7);
  });
});

describe("isTimeZone", () => {
  it("knows IANA names and nothing else", () => {
    expect(isTimeZone("Europe/Paris")).toBe(true);
    expect(isTimeZone("UTC")).toBe(true);
    expect(isTimeZone("Mars/Olympus")).toBe(false);
  });
});

describe("fire tokens", () => {
  const now = new Date("2026-12-04T12:00:00Z");
  const claims = {
    project: "acme",
    route: "/v1/orders",
    scheduleId: "sch_abc",
    mode: "live" as const,
    fireId: "sch_abc-2026-12-04T12:00:00Z",
    issuedAt: now.getTime(),
  };
  const call = { project: "acme", route: "/v1/orders", fireId: claims.fireId };

  it("vouches for the schedule and pool it was signed for", async () => {
    const key = await importFireKey("e".repeat(32));
    const token = await fireToken(key, claims);
    expect(await verifyFireToken(key, token, call, now)).toEqual({
      scheduleId: "sch_abc",
      mode: "live",
    });
  });

  it("holds nothing for another project, path, fire, pool, time or key", async () => {
    const key = await importFireKey("e".repeat(32));
    const token = await fireToken(key, claims);
    const later = new Date(now.getTime() + FIRE_TOKEN_TTL_MS + 1);
    expect(await verifyFireToken(key, token, { ...call, project: "other" }, now)).toBeNull();
    expect(await verifyFireToken(key, token, { ...call, route: "/v1/refunds" }, now)).toBeNull();
    expect(await verifyFireToken(key, token, { ...call, fireId: "x" }, now)).toBeNull();
    expect(await verifyFireToken(key, token, { ...call, fireId: null }, now)).toBeNull();
    expect(await verifyFireToken(key, token.replace(".live.", ".test."), call, now)).toBeNull();
    expect(await verifyFireToken(key, token, call, later)).toBeNull();
    const otherKey = await importFireKey("f".repeat(32));
    expect(await verifyFireToken(otherKey, token, call, now)).toBeNull();
  });

  it("is told from an API key's call by its scheme", () => {
    expect(isFireToken("Relay-Fire sch_abc.live.1.x")).toBe(true);
    expect(isFireToken("Bearer rk_live_x")).toBe(false);
  });
});
