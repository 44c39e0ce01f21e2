/**
 * The control plane's clock. Real time, plus an offset that only `RELAY_DEV_CLOCK=1` lets the
 * admin move (POST /admin/clock), so tests and demos can cross expiry and grace boundaries.
 * The offset lives in Postgres, so the worker's rotation runs on the same clock.
 */
import { recordChange, waitForEdges } from "./api/changes.ts";
import type { Sql } from "./db/client.ts";

export interface Clock {
  now(): Date;
  offsetMs(): number;
  advance(seconds: number): Promise<number>;
}

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

export async function readClockOffset(sql: Sql): Promise<number> {
  const [row] = await sql<{ offsetMs: string }[]>`select offset_ms from dev_clock`;
  return Number(row?.offsetMs ?? 0);
}
