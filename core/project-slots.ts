/**
 * A worker's capacity, shared between projects: each pool (async attempts, sync calls,
 * notifications) lets one project have at most `perProject` calls in flight on this worker, so
 * one project's hanging targets can take no more than that share, whatever it sends. A call
 * over its project's share is not made and does not wait in a slot: the caller is told "busy"
 * and waits durably (a workflow timer), or is refused (a sync call).
 */

/** Gives the slot back; a second call does nothing. */
export type Release = () => void;

/** Told of each project's count as it changes, and of each call turned away (the metrics). */
export interface SlotObserver {
  inFlight?(project: string, count: number): void;
  turnedAway?(project: string): void;
}

export class ProjectSlots {
  private readonly inFlight = new Map<string, number>();

  constructor(
    readonly perProject: number,
    private readonly observer: SlotObserver = {},
  ) {}

  /** A slot for `project`, or null when it has `perProject` in flight already. */
  take(project: string): Release | null {
    const count = this.inFlight.get(project) ?? 0;
    if (count >= this.perProject) {
      this.observer.turnedAway?.(project);
      return null;
    }
    this.set(project, count + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.set(project, (this.inFlight.get(project) ?? 1) - 1);
    };
  }

  count(project: string): number {
    return this.inFlight.get(project) ?? 0;
  }

  private set(project: string, count: number): void {
    // Projects with nothing in flight are forgotten: the map holds only busy projects.
    if (count > 0) this.inFlight.set(project, count);
    else this.inFlight.delete(project);
    this.observer.inFlight?.(project, count);
  }
}

/** The first wait of a delivery its project's share turned away, and the longest. */
export const BUSY_WAIT_MS = { first: 1000, max: 30_000 } as const;

/**
 * How long a delivery waits before it tries for a slot again, after `waits` waits already:
 * doubling from 1 s to 30 s, less up to a quarter at random (`random` in [0, 1)), so a
 * project's waiting deliveries do not all come back in the same second.
 */
export function busyWaitMs(waits: number, random: number): number {
  const full = Math.min(BUSY_WAIT_MS.first * 2 ** Math.min(waits, 16), BUSY_WAIT_MS.max);
  return Math.round(full * (1 - random / 4));
}
