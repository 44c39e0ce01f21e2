import {
  type CallReservation,
  deliveryHolds,
  isMetered,
  type ReservationRefusal,
} from "../../core/billing.ts";
import { RelayError } from "../../core/errors.ts";
import type { KeyMode } from "../../core/model.ts";
import { waitingCapMessage } from "../../core/waiting.ts";
import type { EdgeDeps } from "../deps.ts";
import type { Received, Step } from "../pipeline.ts";
import type { TakenSpare } from "../spare-holds.ts";

/**
 * What the edge knows without asking: a key's credit pool the control plane reports empty takes
 * no more calls (402), and a project whose held deliveries reached its cap no more async calls
 * (409), since any of them may be held too. Neither costs a control-plane call.
 */
export const credits: Step<Received> = async function credits(envelope, next) {
  const { mode } = envelope.key;
  const state = envelope.projectState;
  if (state.exhaustedPools.includes(mode)) {
    throw new RelayError("insufficient_credits", `the ${mode} credit pool is empty`);
  }
  const queues = envelope.endpoint.targets.some((t) => t.deliveryMode === "async");
  if (queues && state.heldDeliveriesFull) {
    throw new RelayError("limit_exceeded", waitingCapMessage(state.maxWaitingDeliveries));
  }
  return next(envelope);
};

/** What a call reserved: give back the part of it that was not queued after all. */
export interface Reserved {
  release(targetIds: readonly string[]): void;
}

const nothingReserved: Reserved = { release() {} };

/**
 * Reserves what the call needs before anything is queued (docs/design.md "Credits"), with one
 * control-plane call: its deliveries' credits from a metered pool (402 when they do not fit in
 * what is left), and a delayed call's place among its project's waiting deliveries, or a place
 * for each target that holds its deliveries now (`heldTargetIds`; 409 past the cap). An
 * immediate call to an unmetered pool and targets that hold nothing reserves nothing and asks
 * nothing.
 */
export async function reserveCall(
  deps: Pick<EdgeDeps, "reserveDeliveries" | "releaseDeliveries" | "logError">,
  call: Received,
  requestId: string,
  heldTargetIds: string[] = [],
): Promise<Reserved> {
  const reservation = reservationOf(call, requestId, heldTargetIds);
  const waits = call.notBefore || heldTargetIds.length > 0;
  if (reservation.holds.length === 0 && !waits) return nothingReserved;
  const refusal = await deps.reserveDeliveries(reservation).catch((err: unknown) => {
    // An edge cut off from the control plane serves from its cache for its lease (its pools'
    // and held deliveries' flags, checked above): the call goes on without a reservation, so
    // a pool may overdraw by what such edges accept meanwhile (docs/api.md "Credits").
    deps.logError({ err, requestId }, "no reservation: the control plane did not answer");
    return "unreserved" as const;
  });
  if (refusal === "unreserved") return nothingReserved;
  if (refusal) throw refusalError(reservation.pool, refusal);
  return reservedFor(deps, call.project, requestId);
}

/** A request's reservation, made: what is not queued after all goes back. */
export function reservedFor(
  deps: Pick<EdgeDeps, "releaseDeliveries" | "logError">,
  project: string,
  requestId: string,
): Reserved {
  return {
    release(targetIds) {
      if (targetIds.length === 0) return;
      // Not awaited: the caller's answer does not wait; one lost is swept (store/retention.ts).
      deps.releaseDeliveries(project, requestId, [...targetIds]).catch((err: unknown) => {
        deps.logError({ err, requestId }, "a reservation could not be given back");
      });
    },
  };
}

/**
 * A metered call to one stream target looks for the credit held ahead for it
 * (../spare-holds.ts): its request id, when there is one, is the call's. Null for other calls.
 */
export async function spareHold(
  deps: Pick<EdgeDeps, "spareHolds">,
  call: Received,
): Promise<TakenSpare | null> {
  const [target, ...others] = call.endpoint.targets;
  const pool = call.key.mode;
  const streamAlone = target?.deliveryMode === "stream" && others.length === 0;
  if (!deps.spareHolds || !streamAlone || !isMetered(call.projectState.plan, pool)) return null;
  const [hold] = deliveryHolds([target], call.body.byteLength);
  return hold ? deps.spareHolds.take(call.project, pool, hold) : null;
}

/**
 * What a call holds: its deliveries' credits from a metered pool, a delayed call's place, the
 * places of its targets that hold their deliveries now.
 */
export function reservationOf(
  call: Received,
  requestId: string,
  heldTargetIds: string[] = [],
): CallReservation {
  const pool = call.key.mode;
  const holds = isMetered(call.projectState.plan, pool)
    ? deliveryHolds(call.endpoint.targets, call.body.byteLength)
    : [];
  return {
    project: call.project,
    pool,
    requestId,
    holds,
    notBefore: call.notBefore,
    ...(heldTargetIds.length > 0 && { heldTargetIds }),
  };
}

/** A reservation's refusal, as the caller is told it (402, or 409 past the waiting cap). */
export function refusalError(pool: KeyMode, refusal: ReservationRefusal): RelayError {
  if (refusal.code === "insufficient_credits") {
    return new RelayError(
      "insufficient_credits",
      `the ${pool} credit pool has too few credits left for this call's deliveries`,
    );
  }
  return new RelayError("limit_exceeded", waitingCapMessage(refusal.cap));
}
