/**
 * A request's deliveries as its workflow and a batch's first attempts both see them, and what an
 * attempt at one answers: pure, so the workflow sandbox and the activities share it.
 */
import type { Hold } from "../core/circuit.ts";
import type { AttemptVerdict, DeliveryInput } from "../core/delivery.ts";
import { THROTTLED } from "../core/flow.ts";
import type { DeliveryTarget, KeyMode, RequestStatus } from "../core/model.ts";
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
}

/** A request as its workflow opens it in the log. */
export type RequestRow = RequestOpening;

/** An attempt its project's share of the worker turned away: how long it waits, on a timer. */
export interface Busy {
  kind: "busy";
  waitMs: number;
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
