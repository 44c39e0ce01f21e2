/**
 * The credit rule (docs/design.md "Billing"): each delivery that reached its target costs
 * max(1, ceil(bytes / 64 KiB)) credits from the pool its key's mode picks, once however many
 * tries it took. Free-tier projects relay live traffic unmetered.
 */
import type { KeyClaim, KeyClaimOutcome } from "./idempotency.ts";
import type { LanePlace } from "./lanes.ts";
import type { DeliveryMode, KeyMode, Plan } from "./model.ts";

export const CREDIT_UNIT_BYTES = 64 * 1024;

export function deliveryCredits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / CREDIT_UNIT_BYTES));
}

export function isMetered(plan: Plan, pool: KeyMode): boolean {
  return !(plan === "free" && pool === "live");
}

/** One delivery's hold: the credits its target's pool keeps for it until it settles. */
export interface CreditHold {
  targetId: string;
  credits: number;
}

/** What a call reserves before it is queued (EdgeService.ReserveDeliveries). */
export interface CallReservation {
  project: string;
  pool: KeyMode;
  requestId: string;
  /** Its deliveries' credits (`deliveryHolds`); none from an unmetered pool. */
  holds: CreditHold[];
  /** A delayed call's time: it takes a place among the project's waiting deliveries. */
  notBefore: Date | null;
  /**
   * An immediate call's targets whose deliveries are held now (core/waiting.ts `heldPlaces`):
   * each takes a place among the project's waiting deliveries too.
   */
  heldTargetIds?: string[];
}

/** An immediate call's holds, reserved together with others of its project and pool. */
export interface CallHolds {
  requestId: string;
  holds: CreditHold[];
}

/** Immediate calls of one project and pool, in arrival order (ReserveDeliveriesBatch). */
export interface BatchReservation {
  project: string;
  pool: KeyMode;
  calls: CallHolds[];
}

/**
 * Async calls accepted together (AcceptCalls): reserved as a batch is (a delayed one's place
 * taken too), and the start of the workflow that delivers them kept with the reservation, so the
 * edge may answer 202 before it makes the start.
 */
export interface CallsAcceptance extends BatchReservation {
  workflowId: string;
  /** The start as Temporal's HTTP API takes it. */
  start: Uint8Array;
  /** Workflows the edge started since its last acceptance: their starts are kept no longer. */
  started: string[];
  /**
   * Bodies of calls that travel by reference (too large for the start's input), stored in the
   * same transaction whether or not the start is kept.
   */
  bodies?: StoredBody[];
  /** The Idempotency-Keys of calls that carry one, claimed in the same transaction. */
  claims?: KeyClaim[];
  /** Ordered calls' places in their lanes, joined in the same transaction when it is kept. */
  lanes?: LanePlace[];
  /** Delayed calls' places among their project's waiting deliveries, taken in it. */
  scheduled?: ScheduledPlace[];
  /**
   * The workflow id of the kept start the calls join (accepted, not made yet): `workflowId` and
   * `start` replace it, their requests added to it (a lone call's own start becomes a batch's).
   */
  joins?: string | undefined;
}

/** A delayed call's time: it takes a place among the project's waiting deliveries until then. */
export interface ScheduledPlace {
  requestId: string;
  notBefore: Date;
}

/** A call's body, stored under its request id (its reference) for its deliveries to read. */
export interface StoredBody {
  requestId: string;
  body: Uint8Array;
}

/** Each call's refusal (null when reserved); accepted when none was refused and the start kept. */
export interface CallsAccepted {
  refusals: (ReservationRefusal | null)[];
  accepted: boolean;
  /**
   * Set when a call's Idempotency-Key was claimed before: what each call is ("claimed" for the
   * others), and nothing was reserved or kept.
   */
  claims?: KeyClaimOutcome[];
}

/** A hold as stored: a request's delivery to one target. */
export interface RequestHold extends CreditHold {
  requestId: string;
}

/**
 * Which calls of a batch fit, decided one after another as separate reservations would be: a
 * call fits, all or none, when the credits of its deliveries not held or charged already (a
 * repeat's, by `taken` or by a call before it in the batch) fit in what the calls before it
 * left; a call that adds nothing always fits. `left`: the pool's balance less what it holds;
 * null when the pool has never had credits. Answers each call's fit, in order, and the holds
 * to add.
 */
export function fittingCalls(
  left: number | null,
  calls: readonly CallHolds[],
  taken: ReadonlySet<string>,
): { fits: boolean[]; holds: RequestHold[] } {
  const held = new Set(taken);
  const holds: RequestHold[] = [];
  let room = left ?? 0;
  const fits = calls.map(({ requestId, holds: wanted }) => {
    const fresh = wanted.filter((hold) => !held.has(holdKey(requestId, hold.targetId)));
    const credits = fresh.reduce((sum, hold) => sum + hold.credits, 0);
    if (fresh.length === 0) return true;
    if (left === null || credits > room) return false;
    room -= credits;
    for (const hold of fresh) {
      held.add(holdKey(requestId, hold.targetId));
      holds.push({ requestId, ...hold });
    }
    return true;
  });
  return { fits, holds };
}

/** A delivery's hold (or charge) by request and target, as `fittingCalls` takes them. */
export function holdKey(requestId: string, targetId: string): string {
  // NUL: in no id (Postgres text cannot hold it).
  return `${requestId}\u0000${targetId}`;
}

/** Why a reservation was refused: its credits do not fit, or the cap it met. */
export type ReservationRefusal =
  | { code: "insufficient_credits" }
  | { code: "limit_exceeded"; cap: number };

/**
 * What a metered call holds until each of its deliveries settles (docs/design.md "Credits"): an
 * async or sync delivery what it will be charged (the body's credits); a stream, billed by what
 * it streams back, the least any delivery costs, so only the part past that can overdraw.
 */
export function deliveryHolds(
  targets: readonly { id: string; deliveryMode: DeliveryMode }[],
  bodyBytes: number,
): CreditHold[] {
  return targets.map((target) => ({
    targetId: target.id,
    credits: deliveryCredits(target.deliveryMode === "stream" ? 0 : bodyBytes),
  }));
}

/**
 * Counts what a stream delivered to its caller, less SSE heartbeats (a comment line, `:` first,
 * and the blank line ending it), across chunk boundaries: feed it every chunk, then `finish`.
 * Only an event stream has heartbeats; any other body is counted whole, `:` lines included.
 */
export class StreamMeter {
  bytes = 0;
  private readonly eventStream: boolean;
  /** The current line's bytes so far, and whether it is a comment or blank. */
  private lineBytes = 0;
  private lineIsComment: boolean | null = null;
  private lineIsBlank = true;
  private previousWasComment = false;

  /** `contentType`: the stream's Content-Type, which says whether it is an event stream. */
  constructor(contentType: string | null) {
    this.eventStream = /^text\/event-stream\s*(;|$)/i.test(contentType ?? "");
  }

  add(chunk: Uint8Array): void {
    for (const byte of chunk) {
      if (this.lineIsComment === null) this.lineIsComment = byte === 0x3a; // ':'
      if (byte !== 0x0a && byte !== 0x0d) this.lineIsBlank = false;
      this.lineBytes++;
      if (byte === 0x0a) this.endLine();
    }
  }

  /** The stream ended (or was cut): a last line without its newline still counts. */
  finish(): number {
    this.endLine();
    return this.bytes;
  }

  private endLine(): void {
    const heartbeat =
      this.eventStream && (this.lineIsComment || (this.lineIsBlank && this.previousWasComment));
    if (!heartbeat) this.bytes += this.lineBytes;
    this.previousWasComment = this.lineIsComment === true;
    this.lineBytes = 0;
    this.lineIsComment = null;
    this.lineIsBlank = true;
  }
}
