/**
 * A request's deliveries as its workflow and a batch's first attempts both see them, and what an
 * attempt at one answers: pure, so the workflow sandbox and the activities share it.
 */
import type { Hold } from "../core/circuit.ts";
import type { AttemptVerdict, DeliveryInput } from "../core/delivery.ts";
import { THROTTLED } from "../core/flow.ts";
import type { DeliveryTarget, KeyMode, RequestStatus } from "../core/model.ts";
import type { EarlierAttempts } from "../store/attempt-log.ts";
import type { RequestOpening } from "../store/request-log.ts";

/** One delivery: a request to one of its async targets, as an attempt takes it. */
export interface DeliverInput {
  requestId: string;
  /** Who pays: the project, from the pool its key's mode picks. */
  project: string;
  keyMode: KeyMode;
  target: DeliveryTarget;
  headers: Record<string, string>;
  /** The body's bytes in base64; "" when it waits in Postgres under `bodyRef`. */
  bodyBase64: string;
  /** An input queued before bodies travelled in base64 carries its body as text. */
  body?: string;
  bodyRef?: string | undefined;
  /** The one try an open circuit lets through (circuit.ts); any other hold still holds it. */
  probe?: boolean;
  /** The workflow waits itself when the project's share is full (a `Busy` answer). */
  waitsWhenBusy?: boolean;
  /** Let go by its target's drain: it takes the room it was let go for (core/flow.ts). */
  fromQueue?: boolean;
  /** A replay's number: what its charge is kept under (core/delivery.ts). */
  replay?: number;
  /** An earlier try may have reached the target meanwhile: the log is read first (`Busy`). */
  mayHaveLanded?: boolean;
}

/** A request as its workflow opens it in the log. */
export type RequestRow = RequestOpening;

/**
 * An attempt not made now, that waits on a timer: its project's share of the worker was full, or
 * (`mayHaveLanded`) a first run of it is still in flight on another worker, whose outcome the
 * next try reads in the log before it calls the target.
 */
export interface Busy {
  kind: "busy";
  waitMs: number;
  mayHaveLanded?: true;
}

/**
 * A first attempt's verdict, and the request's status when the attempt settled it; or, for a
 * target whose deliveries wait, why it was not tried.
 */
export type FirstAttempt =
  | (AttemptVerdict & { settled?: RequestStatus })
  | { kind: "held"; hold: Hold | typeof THROTTLED }
  | Busy;

/** One delivery per async target of the request, in the targets' order. */
export function asyncDeliveries(input: DeliveryInput): DeliverInput[] {
  const { targets, headers, bodyBase64, body } = input;
  return targets
    .filter((target) => target.deliveryMode === "async")
    .map((target) => ({
      requestId: input.requestId,
      project: input.project,
      keyMode: input.keyMode,
      target,
      headers,
      bodyBase64,
      ...(body !== undefined && { body }),
      bodyRef: input.bodyRef,
      waitsWhenBusy: true,
      ...(input.replay && { replay: input.replay }),
    }));
}

/**
 * Whether a delivery goes on after its first attempt: to retry, to wait for its target (held)
 * or for its project's share of the worker (busy); null, a first attempt that itself failed.
 */
export function goesOn(verdict: FirstAttempt | null | undefined): boolean {
  return !verdict || verdict.kind === "retry" || verdict.kind === "held" || verdict.kind === "busy";
}

/** A verdict that the delivery waits only for its limited target's room (core/flow.ts). */
export function isThrottled(verdict: FirstAttempt | null | undefined): boolean {
  return verdict?.kind === "held" && verdict.hold === THROTTLED;
}

/** The targets a settle gives the credit holds back for (those not charged). */
export function targetIdsOf(deliveries: DeliverInput[]): string[] {
  return deliveries.map((delivery) => delivery.target.id);
}

/** An ordered request a batch did not attempt: it waits for its turn, or has it and goes next. */
export type InLane = "waits" | "ready";

/**
 * A batched request's first attempts: settled there when they ended it; their verdicts, by async
 * target in order, with which it waits in the batch or continues as its own workflow; or, an
 * ordered one, not attempted (./batch-lanes.ts).
 */
export type BatchedFirst =
  | { settled: RequestStatus }
  | { verdicts: (FirstAttempt | null)[] }
  | { inLane: InLane };

/** A delivery's verdict from its earlier tries, when it is not to be tried now (`rerunVerdict`). */
export type TriedBefore = (delivery: DeliverInput) => FirstAttempt | undefined;

/** Room beyond a target's own timeout for a first attempt's writes to the log. */
export const FIRST_ATTEMPT_SLACK_MS = 10_000;

/**
 * What a first attempt that may have run before (its workflow task retried) makes of what the log
 * shows (store/attempt-log.ts `earlierAttempts`): a delivered target is not called again; one
 * whose first run is still in flight on another live worker (its task timed out there) waits
 * until that run must have ended, and then reads the log first. Undefined: make the attempt (an
 * earlier one without an end, on a dead worker or past its time, is logged lost).
 */
export function rerunVerdict(
  earlier: EarlierAttempts | undefined,
  target: Pick<DeliveryTarget, "timeoutSeconds">,
  workerId: string,
  nowMs: number,
): FirstAttempt | undefined {
  if (!earlier) return undefined;
  if (earlier.delivered !== null) return { kind: "delivered", status: earlier.delivered };
  const run = earlier.unended;
  // This worker's own first run still in flight is joined instead (workflows/attempts.ts).
  if (!run?.workerAlive || run.workerId === workerId) return undefined;
  const endsBy = run.startedAtMs + target.timeoutSeconds * 1000 + FIRST_ATTEMPT_SLACK_MS;
  return endsBy > nowMs ? { kind: "busy", waitMs: endsBy - nowMs, mayHaveLanded: true } : undefined;
}

/** Why a delivery waits before its next attempt, when it does. */
export type Waiting = "held" | Busy | null;

/** A delivery whose first attempt did not end it: when it goes on, and why it waits. */
interface Retrying {
  delivery: DeliverInput;
  delayMs: number;
  waiting: Waiting;
}

/**
 * How a delivery goes on after its first attempt's verdict; null when that attempt ended it. A
 * first attempt that failed as an activity (null) may have reached its target all the same: the
 * next one reads the log first (`mayHaveLanded`), so a 2xx logged there is not sent again.
 */
export function retryingOf(delivery: DeliverInput, verdict?: FirstAttempt | null): Retrying | null {
  if (verdict?.kind === "held") return { delivery, delayMs: 0, waiting: "held" };
  if (verdict?.kind === "busy") return { delivery, delayMs: 0, waiting: verdict };
  if (!goesOn(verdict)) return null;
  if (verdict === null) {
    return { delivery: { ...delivery, mayHaveLanded: true }, delayMs: 0, waiting: null };
  }
  return { delivery, delayMs: verdict?.kind === "retry" ? verdict.delayMs : 0, waiting: null };
}
