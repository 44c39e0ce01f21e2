/**
 * Stream calls' credit holds, made one call ahead. A metered stream call holds its credit before
 * its target is called (docs/api.md "Holds"), and asking the control plane for it was the one
 * round trip on a stream's way to its first byte. So once a stream target has had a call, the
 * edge holds the next call's credit ahead, under a request id of its own making: that call takes
 * the hold and its request id and asks nothing, and once its first byte is out the next spare is
 * held in the background.
 *
 * A spare is a hold like any other: it counts as held in the pool, and a pool that cannot fit it
 * gets none (its calls then reserve on their way, and are 402 when they do not fit). Bounded: one
 * spare per target, `maxPerProject` targets a project, `maxSpares` in all; a spare unused for
 * `idleMs` goes back, as every spare does when the edge stops. One left by a lost edge is swept
 * like any orphan hold (store/retention.ts).
 */
import type { CreditHold } from "../core/billing.ts";
import type { KeyMode } from "../core/model.ts";
import type { ControlPlane } from "./control.ts";

export interface SpareHoldOptions {
  reserve: ControlPlane["reserveDeliveries"];
  release: ControlPlane["releaseDeliveries"];
  newRequestId: () => string;
  logError: (fields: Record<string, unknown>, message: string) => void;
  /** Milliseconds, injected for tests. */
  now?: () => number;
  idleMs?: number;
  maxPerProject?: number;
  maxSpares?: number;
}

/** A call's look for its spare: `holdNext` holds the target's next one, in the background. */
export interface TakenSpare {
  /** The request id of the spare held for the call, now the call's; null when there was none. */
  requestId: string | null;
  /**
   * Called once the call's answer has begun (its first byte is out, or it failed): the next
   * spare's round trip then does not compete with this call's way to its first byte.
   */
  holdNext(): void;
}

export interface SpareHolds {
  /**
   * A call's spare. One being held when the call comes is waited for: the edge does not reserve
   * the call's credit beside its own spare's, and so take more than its calls need.
   */
  take(project: string, pool: KeyMode, hold: CreditHold): Promise<TakenSpare>;
  /** Gives every spare back, and holds no more. */
  stop(): Promise<void>;
}

/** A spare a minute unused goes back: a target streamed to less often pays its own round trip. */
export const SPARE_IDLE_MS = 60_000;
export const MAX_SPARES_PER_PROJECT = 16;
export const MAX_SPARES = 1_000;

const nothingTaken: TakenSpare = { requestId: null, holdNext() {} };

function once(run: () => void): () => void {
  let ran = false;
  return () => {
    if (ran) return;
    ran = true;
    run();
  };
}

interface Spare {
  project: string;
  pool: KeyMode;
  hold: CreditHold;
  /** The request id its hold is under; null once taken, until the next is held. */
  requestId: string | null;
  /** Settles when the next hold, being made, is answered. */
  holding: Promise<void> | null;
  /** When a call last took it, or looked for it. */
  usedAt: number;
}

export function spareHolds(options: SpareHoldOptions): SpareHolds {
  const now = options.now ?? Date.now;
  const idleMs = options.idleMs ?? SPARE_IDLE_MS;
  const maxPerProject = options.maxPerProject ?? MAX_SPARES_PER_PROJECT;
  const maxSpares = options.maxSpares ?? MAX_SPARES;
  /** By project, pool and target. */
  const spares = new Map<string, Spare>();
  const perProject = new Map<string, number>();
  let stopped = false;

  const giveBack = (spare: Spare, requestId: string) =>
    options.release(spare.project, requestId, [spare.hold.targetId]).catch((err: unknown) => {
      options.logError({ err, requestId }, "a spare stream hold could not be given back");
    });

  const forget = (key: string, spare: Spare) => {
    spares.delete(key);
    const left = (perProject.get(spare.project) ?? 1) - 1;
    if (left > 0) perProject.set(spare.project, left);
    else perProject.delete(spare.project);
  };

  /** Holds the spare's next credit; one refused or unanswered leaves the target without. */
  const holdNext = (key: string, spare: Spare) => {
    if (stopped || spares.get(key) !== spare) return; // swept while its call ran
    const requestId = options.newRequestId();
    const { project, pool, hold } = spare;
    spare.holding = options
      .reserve({ project, pool, requestId, holds: [hold], notBefore: null })
      .then(
        (refusal) => {
          const current = !stopped && spares.get(key) === spare;
          if (!refusal && current) {
            spare.requestId = requestId;
            return;
          }
          if (!refusal) void giveBack(spare, requestId); // the edge stopped meanwhile
          if (current) forget(key, spare);
        },
        () => {
          // Left to the calls' own reservations, which log an outage.
          if (!stopped && spares.get(key) === spare) forget(key, spare);
        },
      )
      .finally(() => {
        spare.holding = null;
      });
  };

  /** The spare's request id, now the taker's, with its `holdNext`; none when not held. */
  const takeHeld = (key: string, spare: Spare): TakenSpare => {
    const { requestId } = spare;
    if (requestId === null || spares.get(key) !== spare) return nothingTaken;
    spare.requestId = null;
    return { requestId, holdNext: once(() => holdNext(key, spare)) };
  };

  /** The spares unused for `idleMs` go back; one being held goes back as it lands. */
  const sweep = () => {
    const idleSince = now() - idleMs;
    for (const [key, spare] of spares) {
      if (spare.usedAt > idleSince) continue;
      forget(key, spare);
      if (spare.requestId) void giveBack(spare, spare.requestId);
    }
  };
  const timer = setInterval(sweep, Math.max(1_000, idleMs / 4));
  (timer as { unref?: () => void }).unref?.();

  return {
    async take(project, pool, hold) {
      if (stopped) return nothingTaken;
      // A stream target's hold is always the same (core/billing.ts `deliveryHolds`).
      const key = `${project}\u0000${pool}\u0000${hold.targetId}`;
      const spare = spares.get(key);
      if (spare) {
        spare.usedAt = now();
        if (spare.holding) await spare.holding;
        // None when another call took it, or it could not be held: this call reserves its own.
        return takeHeld(key, spare);
      }
      const projectSpares = perProject.get(project) ?? 0;
      if (projectSpares >= maxPerProject || spares.size >= maxSpares) return nothingTaken;
      const fresh: Spare = { project, pool, hold, requestId: null, holding: null, usedAt: now() };
      spares.set(key, fresh);
      perProject.set(project, projectSpares + 1);
      return { requestId: null, holdNext: once(() => holdNext(key, fresh)) };
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      const held = [...spares.values()];
      spares.clear();
      perProject.clear();
      await Promise.all(
        held.flatMap((spare) => (spare.requestId ? [giveBack(spare, spare.requestId)] : [])),
      );
    },
  };
}
