/**
 * Lane turns handed over inside one worker. A batch's local activity whose ordered requests wait
 * for their turns (./batch-lanes.ts) listens here for a while; a turn given on this worker to one
 * of them (a leave's, ../store/lanes.ts `passTurns`) is handed to that activity at once instead of
 * signalled to its batch. Under a contended key the turn mostly passes between two batches'
 * activities running side by side on one worker, and each signal cost the receiving batch a
 * workflow task and an activity more. A turn no listener takes is signalled, as before.
 */
import type { LaneClaim, TurnGiven } from "../store/lanes.ts";

/** The turns one activity listens for. */
export interface TurnInbox {
  /** The turns handed over since the last look. */
  take(): TurnGiven[];
  /** Waits up to `ms` for a turn to be handed over; answers at once those here already. */
  next(ms: number): Promise<TurnGiven[]>;
  /** Stops listening; answers the turns handed over and not taken yet. */
  close(): TurnGiven[];
}

const keyOf = (carrier: string, laneId: string, requestId: string, targetId: string) =>
  `${carrier}\n${laneId}\n${requestId}\n${targetId}`;

class Inbox implements TurnInbox {
  private arrived: TurnGiven[] = [];
  private wake: (() => void) | null = null;

  constructor(
    private readonly listening: Map<string, Inbox>,
    private readonly keys: string[],
  ) {
    for (const key of keys) listening.set(key, this);
  }

  hand(given: TurnGiven): void {
    this.arrived.push(given);
    this.wake?.();
  }

  take(): TurnGiven[] {
    const taken = this.arrived;
    this.arrived = [];
    return taken;
  }

  async next(ms: number): Promise<TurnGiven[]> {
    if (this.arrived.length === 0 && ms > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(resolve, ms);
      });
      clearTimeout(timer);
      this.wake = null;
    }
    return this.take();
  }

  close(): TurnGiven[] {
    // Synchronous with `hand`: a turn handed over before this is answered, none after it.
    for (const key of this.keys) if (this.listening.get(key) === this) this.listening.delete(key);
    return this.take();
  }
}

/** A worker's listeners, by the parked entry (its carrier, lane, request and target). */
export class TurnHandOffs {
  private readonly listening = new Map<string, Inbox>();

  /** `carrier`'s activity listens for the turns of these requests at these targets. */
  listen(carrier: string, claims: LaneClaim[]): TurnInbox {
    const keys = claims.flatMap(({ laneId, requestId, targetIds }) =>
      targetIds.map((targetId) => keyOf(carrier, laneId, requestId, targetId)),
    );
    return new Inbox(this.listening, keys);
  }

  /** Hands each turn to its listener here; answers the turns none took, to be signalled. */
  offer(given: TurnGiven[]): TurnGiven[] {
    return given.filter((g) => {
      const inbox = this.listening.get(keyOf(g.workflowId, g.laneId, g.requestId, g.targetId));
      inbox?.hand(g);
      return inbox === undefined;
    });
  }
}
