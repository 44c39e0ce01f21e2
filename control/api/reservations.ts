/**
 * What an edge reserves and accepts before it queues calls (docs/architecture.md, "Batching"):
 * a call's credits and a delayed call's place, a group's reservation with its start kept (and its
 * large bodies and Idempotency-Keys with it), a lone call's key, and what it gives back.
 */

import type {
  BatchReservation,
  CallReservation,
  CallsAcceptance,
  CallsAccepted,
  ReservationRefusal,
  StoredBody,
} from "../../core/billing.ts";
import { RelayError } from "../../core/errors.ts";
import type { KeyClaim, KeyClaimOutcome } from "../../core/idempotency.ts";
import { acceptLoneCall, forgetStarts, keepStart } from "../../store/accepted-starts.ts";
import { insertBodies } from "../../store/bodies.ts";
import {
  fitCredits,
  releaseHolds,
  reserveCredits,
  reserveCreditsBatch,
} from "../../store/credits.ts";
import type { Queryable, Transaction } from "../../store/db.ts";
import { claimKeys, forgetKeys } from "../../store/idempotency.ts";
import { joinLanes } from "../../store/lanes.ts";
import { projectBySlug } from "../../store/projects.ts";
import {
  admitHeld,
  admitScheduled,
  admitScheduledCalls,
  capOf,
  forgetScheduled,
  releasePlaces,
} from "../../store/waiting.ts";
import { requireEdge } from "../auth.ts";
import type { Ctx } from "./context.ts";
import { checkPlace } from "./lanes.ts";

/** Targets one call names at most (an endpoint has far fewer). */
const MAX_HELD_TARGETS = 64;

/**
 * Reserves what a call needs before an edge queues it (docs/design.md "Credits"): its credits
 * (the edge sends holds only for a metered pool), and its places under the project's cap on
 * waiting deliveries: a delayed call's, or one for each target that holds its deliveries now.
 * A call that takes no place is one statement; one that does, one transaction, so a refusal
 * leaves nothing behind. Null when reserved.
 */
export async function reserveDeliveries(
  ctx: Ctx,
  call: CallReservation,
): Promise<ReservationRefusal | null> {
  requireEdge(ctx.caller);
  if (!call.requestId) throw new RelayError("bad_request", "a reservation needs a request id");
  const heldTargetIds = call.heldTargetIds ?? [];
  if (heldTargetIds.length > MAX_HELD_TARGETS) {
    throw new RelayError("bad_request", `a call names at most ${MAX_HELD_TARGETS} held targets`);
  }
  const creditsFit = (q: Queryable) => call.holds.length === 0 || reserveCredits(q, call);
  const tooFew = { code: "insufficient_credits" } as const;
  const { notBefore } = call;
  if (!notBefore && heldTargetIds.length === 0) {
    return (await creditsFit(ctx.sql)) ? null : tooFew;
  }
  const project = await projectBySlug(ctx.sql, call.project);
  if (!project) throw new RelayError("not_found", `no project '${call.project}'`);
  const placed = { projectId: project.id, requestId: call.requestId, now: ctx.now() };
  return ctx.sql
    .begin(async (tx) => {
      if (!(await creditsFit(tx))) throw new Refused(tooFew);
      const cap = await capOf(tx, project.id, ctx.waitingCaps);
      const admitted = notBefore
        ? await admitScheduled(tx, { ...placed, notBefore, cap })
        : await admitHeld(tx, { ...placed, targetIds: heldTargetIds, cap }, ctx.waitingCaps);
      if (!admitted) throw new Refused({ code: "limit_exceeded", cap });
      return null;
    })
    .catch((error: unknown) => {
      if (error instanceof Refused) return error.refusal;
      throw error;
    });
}

/** Calls one batch reserves at most (an edge sends up to 64). */
const MAX_BATCHED_CALLS = 256;

/**
 * Reserves the credits of immediate calls of one project and metered pool that an edge grouped
 * while another reservation of theirs was answered: one transaction under one lock of the pool,
 * each call decided as `reserveDeliveries` would decide it alone, in the batch's order. Answers
 * each call's refusal (null when reserved), in order.
 */
export async function reserveDeliveriesBatch(
  ctx: Ctx,
  batch: BatchReservation,
): Promise<(ReservationRefusal | null)[]> {
  requireEdge(ctx.caller);
  checkBatch(batch);
  if (batch.calls.length === 0) return [];
  const fits = await reserveCreditsBatch(ctx.sql, batch);
  return fits.map(refusalOf);
}

function checkBatch(batch: BatchReservation): void {
  if (batch.calls.length > MAX_BATCHED_CALLS) {
    throw new RelayError("bad_request", `a batch reserves at most ${MAX_BATCHED_CALLS} calls`);
  }
  if (batch.calls.some((call) => !call.requestId)) {
    throw new RelayError("bad_request", "each call of a batch needs a request id");
  }
}

const refusalOf = (fit: boolean): ReservationRefusal | null =>
  fit ? null : { code: "insufficient_credits" };

/** A start's bytes at most: a batch's input is under 2 MB, as Temporal takes it. */
export const MAX_START_BYTES = 2 * 1024 * 1024;
/** Confirmations one acceptance carries at most (an edge sends what it made since its last). */
const MAX_STARTED = 1024;
/** A workflow id's length at most (Temporal's own limit is 1,000). */
const MAX_WORKFLOW_ID = 256;

/**
 * Accepts immediate calls durably (docs/architecture.md, "Accepted before started"): their
 * reservation as `reserveDeliveriesBatch` makes it and, when every call fits, the start of their
 * workflow, in one transaction. A refused call leaves nothing kept: the edge starts the others
 * itself before it answers, as without acceptance. The edge's confirmed starts are forgotten, and
 * the bodies of calls that travel by reference stored, in the same transaction; ordered calls
 * join their lanes in it when the start is kept.
 */
export async function acceptCalls(ctx: Ctx, acceptance: CallsAcceptance): Promise<CallsAccepted> {
  requireEdge(ctx.caller);
  checkBatch(acceptance);
  if (acceptance.calls.length === 0 || !acceptance.workflowId) {
    throw new RelayError("bad_request", "an acceptance needs calls and a workflow id");
  }
  const tooLong = (id: string) => id.length > MAX_WORKFLOW_ID;
  if (
    acceptance.start.byteLength > MAX_START_BYTES ||
    acceptance.started.length > MAX_STARTED ||
    tooLong(acceptance.workflowId) ||
    tooLong(acceptance.joins ?? "") ||
    acceptance.started.some(tooLong)
  ) {
    throw new RelayError("bad_request", "an acceptance's start or confirmations are too large");
  }
  const bodies = acceptance.bodies ?? [];
  const claims = acceptance.claims ?? [];
  const lanes = acceptance.lanes ?? [];
  const scheduled = acceptance.scheduled ?? [];
  const requestIds = acceptance.calls.map((call) => call.requestId);
  const named = [...bodies, ...claims, ...lanes, ...scheduled];
  if (named.some(({ requestId }) => !requestIds.includes(requestId))) {
    throw new RelayError(
      "bad_request",
      "an acceptance stores bodies, keys and places of its calls only",
    );
  }
  if (scheduled.some(({ notBefore }) => Number.isNaN(notBefore.getTime()))) {
    throw new RelayError("bad_request", "a delayed call's place needs its time");
  }
  for (const place of lanes) checkPlace({ ...place, project: acceptance.project });
  if (new Set(requestIds).size < requestIds.length) {
    throw new RelayError("bad_request", "an acceptance names each request once");
  }
  const [lone, ...others] = acceptance.calls;
  if (lone && others.length === 0 && named.length === 0 && acceptance.joins === undefined) {
    const { project, pool, started } = acceptance;
    const { reserved, kept } = await acceptLoneCall(
      ctx.sql,
      { project, pool, ...lone },
      acceptance,
      started,
    );
    return { refusals: [refusalOf(reserved)], accepted: kept };
  }
  return ctx.sql
    .begin(async (tx) => {
      const outcomes = await claimKeys(tx, acceptance.project, claims, false);
      if (outcomes.some((outcome) => outcome !== "claimed")) {
        const outcomeOf = new Map(claims.map((claim, i) => [claim.requestId, outcomes[i]]));
        throw new ClaimedBefore(requestIds.map((id) => outcomeOf.get(id) ?? "claimed"));
      }
      const accepted = await acceptTogether(ctx, tx, acceptance, requestIds, bodies);
      // Not kept: the keys' calls go as workflows of their own, and claim them that way.
      if (!accepted.accepted) await forgetKeys(tx, claims);
      return accepted;
    })
    .catch((error: unknown) => {
      if (!(error instanceof ClaimedBefore)) throw error;
      return { refusals: requestIds.map(() => null), accepted: false, claims: error.outcomes };
    });
}

/** Keys claimed before: thrown out of an acceptance's transaction, so it rolls back whole. */
class ClaimedBefore extends Error {
  constructor(readonly outcomes: KeyClaimOutcome[]) {
    super("claimed before");
  }
}

/**
 * The calls' reservation (a delayed call's place too, when its credits fit) and, when every one
 * fits, their start kept, in `tx`.
 */
async function acceptTogether(
  ctx: Ctx,
  tx: Transaction,
  acceptance: CallsAcceptance,
  requestIds: string[],
  bodies: StoredBody[],
): Promise<CallsAccepted> {
  const metered = acceptance.calls.some((call) => call.holds.length > 0);
  // Pipelined: the confirmations with the reservation's reads, the holds with the start.
  const [{ fits, holding }] = await Promise.all([
    metered
      ? fitCredits(tx, acceptance)
      : { fits: acceptance.calls.map(() => true), holding: Promise.resolve() },
    forgetStarts(tx, acceptance.started),
    insertBodies(tx, acceptance.project, bodies),
  ]);
  const refusals = await takePlaces(ctx, tx, acceptance, fits);
  const [, kept] = await Promise.all([
    holding,
    refusals.every((refusal) => refusal === null) &&
      keepStart(tx, acceptance.project, requestIds, acceptance, acceptance.joins),
  ]);
  // A place taken already was taken by its edge for a start of its own, the acceptance being
  // late: kept too, it would start twice (and its lane wait for good on the one left parked).
  if (kept && (await joinLanes(tx, acceptance.lanes ?? [])) > 0) {
    throw new RelayError("conflict", "an ordered call of the acceptance went on its own");
  }
  return { refusals, accepted: kept === true };
}

/**
 * Each call's refusal: its credits' (`fits`), or for a delayed one whose credits fit, its place
 * among the project's waiting deliveries (store/waiting.ts), taken here.
 */
async function takePlaces(
  ctx: Ctx,
  tx: Transaction,
  acceptance: CallsAcceptance,
  fits: boolean[],
): Promise<(ReservationRefusal | null)[]> {
  const refusals = fits.map(refusalOf);
  const scheduled = acceptance.scheduled ?? [];
  if (scheduled.length === 0) return refusals;
  const project = await projectBySlug(tx, acceptance.project);
  if (!project) throw new RelayError("not_found", `no project '${acceptance.project}'`);
  const cap = await capOf(tx, project.id, ctx.waitingCaps);
  // The calls whose credits fit take their places together, in order.
  const fitting = scheduled.flatMap(({ requestId, notBefore }) => {
    const i = acceptance.calls.findIndex((call) => call.requestId === requestId);
    return refusals[i] === null ? [{ i, requestId, notBefore }] : [];
  });
  if (fitting.length === 0) return refusals;
  const placed = { projectId: project.id, now: ctx.now(), cap, calls: fitting };
  const admitted = await admitScheduledCalls(tx, placed);
  for (const [j, { i }] of fitting.entries()) {
    if (!admitted[j]) refusals[i] = { code: "limit_exceeded", cap };
  }
  return refusals;
}

/**
 * Claims the Idempotency-Key of a call that goes as a workflow of its own (ClaimIdempotencyKey):
 * what an earlier claim of it makes of the call.
 */
export async function claimIdempotencyKey(
  ctx: Ctx,
  project: string,
  claim: KeyClaim,
): Promise<KeyClaimOutcome> {
  requireEdge(ctx.caller);
  if (!claim.requestId || !claim.bodyTag) {
    throw new RelayError("bad_request", "a claim needs a request id and a body tag");
  }
  const [outcome = "claimed"] = await claimKeys(ctx.sql, project, [claim], true);
  return outcome;
}

/** A refusal thrown out of the reservation's transaction, so it rolls back whole. */
class Refused extends Error {
  constructor(readonly refusal: ReservationRefusal) {
    super(refusal.code);
  }
}

/**
 * Gives back what an edge reserved for deliveries it then did not queue (its start to Temporal
 * failed): their holds, and a delayed call's place or their held targets' places.
 */
export async function releaseDeliveries(
  ctx: Ctx,
  requestId: string,
  targetIds: string[],
): Promise<void> {
  requireEdge(ctx.caller);
  await ctx.sql.begin(async (tx) => {
    await releaseHolds(tx, requestId, targetIds);
    // Only a delayed call's start failing brings it here: it waits for nothing now.
    await forgetScheduled(tx, requestId);
    await releasePlaces(tx, requestId, ctx.waitingCaps, targetIds);
  });
}
