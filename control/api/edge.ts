/**
 * What edges ask: a key by hash, a project's routing state or one endpoint's, the change feed and
 * its acks, the reservations of the calls they queue, the log of the streams they proxied, and
 * their shares of endpoints' rate limits.
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
import type { Endpoint, KeyMode, KeyRecord, Plan, RateLimit } from "../../core/model.ts";
import type { PayloadKey } from "../../core/payload-codec.ts";
import {
  DEMAND_WINDOW_MS,
  demandPerSecond,
  type EndpointDemand,
  splitEndpoint,
} from "../../core/rate-shares.ts";
import { acceptLoneCall, forgetStarts, keepStart } from "../../store/accepted-starts.ts";
import { insertBodies } from "../../store/bodies.ts";
import {
  ackChanges,
  type ChangeNotifier,
  keysByHash,
  MAX_LEASE_MS,
  watchChanges,
} from "../../store/changes.ts";
import {
  exhaustedPools,
  fitCredits,
  releaseHolds,
  reserveCredits,
  reserveCreditsBatch,
} from "../../store/credits.ts";
import type { Queryable, Transaction } from "../../store/db.ts";
import { claimKeys, forgetKeys } from "../../store/idempotency.ts";
import { type ProjectView, projectBySlug } from "../../store/projects.ts";
import { liveEdgeCount, recentDemand, recordDemand } from "../../store/rate-demand.ts";
import { type LoggedStream, recordStream as logStream } from "../../store/request-log.ts";
import { loadEndpoints } from "../../store/routing.ts";
import { type EndpointSigningSecrets, projectSigningSecrets } from "../../store/signing.ts";
import { admitScheduled, capOf, forgetScheduled, heldCount } from "../../store/waiting.ts";
import { requireEdge } from "../auth.ts";
import type { Ctx } from "./context.ts";

/** Plan defaults for endpoints without a rate limit of their own. */
export const planRateLimits: Record<Plan, RateLimit> = {
  free: { requestsPerSecond: 10, burst: 20 },
  paid: { requestsPerSecond: 100, burst: 200 },
};

export interface ProjectState {
  project: ProjectView;
  endpoints: Endpoint[];
  defaultRateLimit: RateLimit;
  exhaustedPools: KeyMode[];
  /** The live signing secrets' bytes by endpoint: the edge signs the streams it proxies. */
  signingSecrets: EndpointSigningSecrets[];
  /** The project's cap on scheduled and held deliveries, and whether its held ones reach it. */
  maxWaitingDeliveries: number;
  heldDeliveriesFull: boolean;
}

/** Unknown project and unknown key give the same null after the same single query. */
export async function resolveKey(
  ctx: Ctx,
  project: string,
  keyHash: Uint8Array,
): Promise<KeyRecord | null> {
  requireEdge(ctx.caller);
  const key = (await keysByHash(ctx.sql, [keyHash], ctx.now())).values().next().value;
  return key && key.project === project ? key : null;
}

export async function projectState(ctx: Ctx, slug: string): Promise<ProjectState | null> {
  requireEdge(ctx.caller);
  const project = await projectBySlug(ctx.sql, slug);
  if (!project) return null;
  const { id, ...view } = project;
  const maxWaitingDeliveries = await capOf(ctx.sql, id, ctx.waitingCaps);
  return {
    project: view,
    endpoints: await loadEndpoints(ctx.sql, id),
    defaultRateLimit: planRateLimits[view.plan],
    exhaustedPools: await exhaustedPools(ctx.sql, id, view.plan),
    signingSecrets: await projectSigningSecrets(ctx.sql, ctx.sealingKey, id, ctx.now()),
    maxWaitingDeliveries,
    heldDeliveriesFull: (await heldCount(ctx.sql, id)) >= maxWaitingDeliveries,
  };
}

export interface EndpointState {
  endpoint: Endpoint | null;
  signingSecrets: EndpointSigningSecrets["secrets"];
}

/** One endpoint's state, for an edge that saw a change to that endpoint alone. */
export async function endpointState(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
): Promise<EndpointState> {
  requireEdge(ctx.caller);
  const project = await projectBySlug(ctx.sql, slug);
  if (!project) return { endpoint: null, signingSecrets: [] };
  const [endpoint] = await loadEndpoints(ctx.sql, project.id, { line, path });
  if (!endpoint) return { endpoint: null, signingSecrets: [] };
  const only = { line, path };
  const [secrets] = await projectSigningSecrets(
    ctx.sql,
    ctx.sealingKey,
    project.id,
    ctx.now(),
    only,
  );
  return { endpoint, signingSecrets: secrets?.secrets ?? [] };
}

/**
 * Reserves what a call needs before an edge queues it (docs/design.md "Credits"): its credits
 * (the edge sends holds only for a metered pool), and a delayed call's place under the project's
 * cap on waiting deliveries. An immediate call is one statement; a delayed one, one transaction,
 * so a refusal leaves nothing behind. Null when reserved.
 */
export async function reserveDeliveries(
  ctx: Ctx,
  call: CallReservation,
): Promise<ReservationRefusal | null> {
  requireEdge(ctx.caller);
  if (!call.requestId) throw new RelayError("bad_request", "a reservation needs a request id");
  const creditsFit = (q: Queryable) => call.holds.length === 0 || reserveCredits(q, call);
  const tooFew = { code: "insufficient_credits" } as const;
  const { notBefore } = call;
  if (!notBefore) return (await creditsFit(ctx.sql)) ? null : tooFew;
  const project = await projectBySlug(ctx.sql, call.project);
  if (!project) throw new RelayError("not_found", `no project '${call.project}'`);
  return ctx.sql
    .begin(async (tx) => {
      if (!(await creditsFit(tx))) throw new Refused(tooFew);
      const cap = await capOf(tx, project.id, ctx.waitingCaps);
      const place = { projectId: project.id, requestId: call.requestId, notBefore, cap };
      if (!(await admitScheduled(tx, { ...place, now: ctx.now() }))) {
        throw new Refused({ code: "limit_exceeded", cap });
      }
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
 * the bodies of calls that travel by reference stored, in the same transaction.
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
    acceptance.started.some(tooLong)
  ) {
    throw new RelayError("bad_request", "an acceptance's start or confirmations are too large");
  }
  const bodies = acceptance.bodies ?? [];
  const claims = acceptance.claims ?? [];
  const requestIds = acceptance.calls.map((call) => call.requestId);
  if ([...bodies, ...claims].some(({ requestId }) => !requestIds.includes(requestId))) {
    throw new RelayError("bad_request", "an acceptance stores bodies and keys of its calls only");
  }
  if (new Set(requestIds).size < requestIds.length) {
    throw new RelayError("bad_request", "an acceptance names each request once");
  }
  const [lone, ...others] = acceptance.calls;
  if (lone && others.length === 0 && bodies.length === 0 && claims.length === 0) {
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
      const accepted = await acceptTogether(tx, acceptance, requestIds, bodies);
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

/** The calls' reservation and, when every one fits, their start kept, in `tx`. */
async function acceptTogether(
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
  const [, kept] = await Promise.all([
    holding,
    fits.every(Boolean) && keepStart(tx, acceptance.project, requestIds, acceptance),
  ]);
  return { refusals: fits.map(refusalOf), accepted: kept === true };
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
 * failed): their holds, and a delayed call's place.
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
  });
}

export function changes(ctx: Ctx, notifier: ChangeNotifier, after: bigint, signal: AbortSignal) {
  requireEdge(ctx.caller);
  return watchChanges(ctx.sql, notifier, after, ctx.now, signal);
}

export async function ack(ctx: Ctx, edgeId: string, sequence: bigint, leaseMs: number) {
  requireEdge(ctx.caller);
  if (!edgeId || leaseMs < 1 || leaseMs > MAX_LEASE_MS) {
    throw new RelayError(
      "bad_request",
      `an ack needs an edge id and a lease of 1 to ${MAX_LEASE_MS} ms`,
    );
  }
  await ackChanges(ctx.sql, edgeId, sequence, leaseMs);
}

/**
 * A stream an edge proxied, logged and billed once it ended (`store/request-log.ts`). Streams
 * are recorded here rather than through a workflow: a record is one write, and a workflow per
 * stream cost Temporal and the worker more than the stream itself (docs/benchmarks.md).
 */
export async function recordStream(ctx: Ctx, stream: LoggedStream): Promise<void> {
  requireEdge(ctx.caller);
  const problem = streamProblem(stream);
  if (problem) throw new RelayError("bad_request", `a stream record ${problem}`);
  const error = stream.error?.slice(0, MAX_STREAM_ERROR_CHARS) ?? null;
  await logStream(ctx.sql, { ...stream, error });
}

/** An edge's own failure messages are short; a longer one is cut, not refused (it bills). */
const MAX_STREAM_ERROR_CHARS = 1_000;

function streamProblem(stream: LoggedStream): string | null {
  if (!stream.requestId || !stream.project || !stream.target.id) {
    return "needs a request, a project and a target";
  }
  if (stream.keyMode !== "live" && stream.keyMode !== "test") return "needs a key mode";
  if (Number.isNaN(Date.parse(stream.receivedAt))) return "needs the time it was received";
  const counts = [stream.latencyMs, stream.bytes, stream.bodyBytes];
  if (!counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
    return "has a negative or unsafe count";
  }
  return null;
}

/**
 * The payload codec's keys for an edge: derived from the deployment's secrets, they open only
 * Temporal's payloads (which the edge writes anyway), while the secrets stay here.
 */
export function payloadKeys(ctx: Ctx): PayloadKey[] {
  requireEdge(ctx.caller);
  return ctx.payloadKeys;
}

/** Endpoints one rate-share report may carry; an edge sends its busiest first. */
export const MAX_REPORTED_ENDPOINTS = 10_000;

/**
 * Records an edge's demand and answers its share of each endpoint's limit (core/rate-shares.ts),
 * split from every edge's reports in Postgres, so all control planes answer alike.
 */
export async function exchangeRateShares(
  ctx: Ctx,
  edgeId: string,
  demands: EndpointDemand[],
): Promise<{ fractions: number[]; liveEdges: number }> {
  requireEdge(ctx.caller);
  const problem = rateReportProblem(edgeId, demands);
  if (problem) throw new RelayError("bad_request", `a rate-share report ${problem}`);
  const [counted, liveEdges] = await Promise.all([
    recentDemand(ctx.sql, demands, DEMAND_WINDOW_MS),
    liveEdgeCount(ctx.sql),
  ]);
  const reported = demands.map((d) => ({ ...d, perSecond: demandPerSecond(d) }));
  const fractions = reported.map((d, i) =>
    splitEndpoint(edgeId, d.perSecond, counted[i] ?? [], liveEdges),
  );
  await recordDemand(ctx.sql, edgeId, reported);
  return { fractions, liveEdges };
}

function rateReportProblem(edgeId: string, demands: EndpointDemand[]) {
  if (!edgeId) return "needs an edge id";
  if (demands.length > MAX_REPORTED_ENDPOINTS) {
    return `carries at most ${MAX_REPORTED_ENDPOINTS} endpoints`;
  }
  const bad = demands.find(
    (d) =>
      !d.project ||
      !d.line ||
      !d.path ||
      ![d.accepted, d.refused, d.intervalMs].every((n) => Number.isSafeInteger(n) && n >= 0),
  );
  return bad ? "has an endpoint without a name or counts" : null;
}
