/**
 * The control plane's clock. Real time, plus an offset that only `RELAY_DEV_CLOCK=1` lets the
 * admin move (POST /admin/clock), so tests and demos can cross expiry and grace boundaries.
 * The offset lives in Postgres, so a worker with RELAY_DEV_CLOCK=1 runs on the same clock.
 */
import { recordChange, waitForEdges } from "./changes.ts";
import type { Sql } from "./db.ts";

export interface Clock {
  now(): Date;
  offsetMs(): number;
  advance(seconds: number): Promise<number>;
}

/**
 * Without `enabled` the stored offset is never read: a data directory once used with
 * RELAY_DEV_CLOCK=1 must not put a production process days ahead.
 */
export async function devClock(sql: Sql, enabled: boolean): Promise<Clock> {
  let offset = enabled ? await readClockOffset(sql) : 0;
  return {
    now: () => new Date(Date.now() + offset),
    offsetMs: () => offset,
    /** Moves the clock forward and returns once every live edge runs on the new time. */
    async advance(seconds) {
      const sequence = await sql.begin(async (tx) => {
        const [row] = await tx<{ offsetMs: string }[]>`
          update dev_clock set offset_ms = offset_ms + ${Math.round(seconds * 1000)}
          returning offset_ms`;
        offset = Number(row?.offsetMs ?? 0);
        return recordChange(tx, "", "clock");
      });
      await waitForEdges(sql, sequence);
      return offset;
    },
  };
}

/**
 * The worker's clock: it reads the offset on every use, since the control plane moves it; without
 * `enabled`, real time.
 */
export function workerClock(sql: Sql, enabled: boolean): () => Promise<Date> {
  if (!enabled) return async () => new Date();
  return async () => new Date(Date.now() + (await readClockOffset(sql)));
}

async function readClockOffset(sql: Sql): Promise<number> {
  const [row] = await sql<{ offsetMs: string }[]>`select offset_ms from dev_clock`;
  return Number(row?.offsetMs ?? 0);
}
