import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import type { CreditHold, ReservationRefusal } from "../../core/billing.ts";
import { claimOutcomeNumber } from "../../core/idempotency.ts";
import type { LanePlace } from "../../core/lanes.ts";
import { keyModes } from "../../core/model.ts";
import {
  type DeliveryHold,
  EdgeService,
  type LanePlace as LanePlaceMessage,
  ReserveRefusal,
} from "../../gen/relay/v1/edge_pb.ts";
import type { EndpointSigningSecrets } from "../../store/signing.ts";
import * as bodies from "../api/bodies.ts";
import * as edge from "../api/edge.ts";
import * as lanes from "../api/lanes.ts";
import * as reservations from "../api/reservations.ts";
import type { ControlApp } from "../app.ts";
import type { ContextOf } from "./caller.ts";
import {
  edgeKeyOut,
  endpointOut,
  fromEnum,
  optionalTs,
  projectOut,
  skippedRecordIn,
  streamRecordIn,
} from "./convert.ts";

/** Room for StoreBody's other fields beside the body. */
const ENVELOPE_BYTES = 64 * 1024;

/**
 * `edgeBytes`: the largest inbound body StoreBody carries (MessageLimits.edgeBytes), and the
 * bodies an acceptance stores in all; its start may be larger.
 */
export function edgeService(
  router: ConnectRouter,
  ctxOf: ContextOf,
  { notifier, clock }: Pick<ControlApp, "notifier" | "clock">,
  edgeBytes: number,
): void {
  router.service(
    EdgeService,
    {
      async resolveKey(req, h) {
        const key = await edge.resolveKey(ctxOf(h), req.project, req.keyHash);
        return { key: key ? edgeKeyOut(key) : undefined };
      },
      async *watchChanges(req, h) {
        for await (const batch of edge.changes(ctxOf(h), notifier, req.afterSequence, h.signal)) {
          yield {
            headSequence: batch.headSequence,
            clockOffsetMs: BigInt(clock.offsetMs()),
            changes: batch.changes.map((change) => ({
              sequence: change.sequence,
              project: change.project,
              change:
                change.kind === "key"
                  ? { case: "keyChanged" as const, value: edgeKeyOut(change.key) }
                  : {
                      case: "routingChanged" as const,
                      value: change.kind === "endpoint" ? change.endpoint : {},
                    },
            })),
          };
        }
      },
      async storeBody(req, h) {
        return {
          bodyRef: await bodies.storeBody(ctxOf(h), req.project, req.requestId, req.body),
        };
      },
      async recordSkipped(req, h) {
        await edge.recordSkipped(ctxOf(h), skippedRecordIn(req));
        return {};
      },
      async recordStream(req, h) {
        await edge.recordStream(ctxOf(h), streamRecordIn(req));
        return {};
      },
      async reserveDeliveries(req, h) {
        const refusal = await reservations.reserveDeliveries(ctxOf(h), {
          project: req.project,
          pool: fromEnum(keyModes, req.keyMode) ?? "live",
          requestId: req.requestId,
          holds: req.holds.map(holdIn),
          notBefore: req.notBefore ? timestampDate(req.notBefore) : null,
          heldTargetIds: req.heldTargetIds,
        });
        if (!refusal) return {};
        return refusal.code === "insufficient_credits"
          ? { refusal: ReserveRefusal.INSUFFICIENT_CREDITS }
          : { refusal: ReserveRefusal.LIMIT_EXCEEDED, limit: BigInt(refusal.cap) };
      },
      async reserveDeliveriesBatch(req, h) {
        const refusals = await reservations.reserveDeliveriesBatch(ctxOf(h), {
          project: req.project,
          pool: fromEnum(keyModes, req.keyMode) ?? "live",
          calls: req.calls.map((call) => ({
            requestId: call.requestId,
            holds: call.holds.map(holdIn),
          })),
        });
        return { refusals: refusals.map(refusalOut) };
      },
      async acceptCalls(req, h) {
        const { refusals, accepted, claims } = await reservations.acceptCalls(ctxOf(h), {
          project: req.project,
          pool: fromEnum(keyModes, req.keyMode) ?? "live",
          calls: req.calls.map((call) => ({
            requestId: call.requestId,
            holds: call.holds.map(holdIn),
          })),
          workflowId: req.workflowId,
          start: req.start,
          started: req.started,
          bodies: req.bodies.map(({ requestId, body }) => ({ requestId, body })),
          claims: req.claims.map(({ requestId, bodyTag }) => ({ requestId, bodyTag })),
          lanes: req.lanes.map(placeOf),
          scheduled: req.scheduled.map(({ requestId, notBefore }) => ({
            requestId,
            notBefore: notBefore ? timestampDate(notBefore) : new Date(Number.NaN),
          })),
          joins: req.joinsKeptStart ? req.joinedWorkflowId || req.workflowId : undefined,
        });
        const limited = refusals.find((refusal) => refusal?.code === "limit_exceeded");
        return {
          refusals: refusals.map(refusalOut),
          accepted,
          claims: (claims ?? []).map(claimOutcomeNumber),
          limit: BigInt(limited?.code === "limit_exceeded" ? limited.cap : 0),
        };
      },
      async claimIdempotencyKey(req, h) {
        const outcome = await reservations.claimIdempotencyKey(ctxOf(h), req.project, {
          requestId: req.claim?.requestId ?? "",
          bodyTag: req.claim?.bodyTag ?? "",
        });
        return { outcome: claimOutcomeNumber(outcome) };
      },
      async joinLane(req, h) {
        return { joined: await lanes.joinOrderingLane(ctxOf(h), placeOf(req.place)) };
      },
      async leaveLane(req, h) {
        await lanes.leaveOrderingLane(ctxOf(h), placeOf(req.place));
        return {};
      },
      getPayloadKeys(_, h) {
        return edge.payloadKeys(ctxOf(h));
      },
      async releaseDeliveries(req, h) {
        await reservations.releaseDeliveries(ctxOf(h), req.requestId, req.targetIds);
        return {};
      },
      async exchangeRateShares(req, h) {
        return edge.exchangeRateShares(
          ctxOf(h),
          req.edgeId,
          req.demands.map((d) => ({
            ...d,
            accepted: Number(d.accepted),
            refused: Number(d.refused),
          })),
        );
      },
      async ackChanges(req, h) {
        await edge.ack(ctxOf(h), req.edgeId, req.sequence, req.leaseMs);
        return {};
      },
      async getEndpointState(req, h) {
        const state = await edge.endpointState(ctxOf(h), req.project, req.line, req.path);
        return {
          ...(state.endpoint && { endpoint: endpointOut(state.endpoint) }),
          signingSecrets: state.signingSecrets.map(signingSecretOut),
        };
      },
      async getProjectState(req, h) {
        const state = await edge.projectState(ctxOf(h), req.project);
        if (!state) return {};
        return {
          state: {
            project: projectOut(state.project),
            endpoints: state.endpoints.map(endpointOut),
            signingSecrets: state.signingSecrets.map((e) => ({
              ...e,
              secrets: e.secrets.map(signingSecretOut),
            })),
            defaultRateLimit: state.defaultRateLimit,
            liveCreditsExhausted: state.exhaustedPools.includes("live"),
            testCreditsExhausted: state.exhaustedPools.includes("test"),
            maxWaitingDeliveries: BigInt(state.maxWaitingDeliveries),
            heldDeliveriesFull: state.heldDeliveriesFull,
            heldTargetIds: state.heldTargetIds,
            projectRateLimit: state.projectRateLimit,
          },
        };
      },
    },
    // An acceptance carries a start and, beside it, stored bodies up to one inbound body's size.
    { readMaxBytes: edgeBytes + reservations.MAX_START_BYTES + ENVELOPE_BYTES },
  );
}

function refusalOut(refusal: ReservationRefusal | null): ReserveRefusal {
  if (!refusal) return ReserveRefusal.UNSPECIFIED;
  return refusal.code === "insufficient_credits"
    ? ReserveRefusal.INSUFFICIENT_CREDITS
    : ReserveRefusal.LIMIT_EXCEEDED;
}

function holdIn(hold: DeliveryHold): CreditHold {
  return { targetId: hold.targetId, credits: Number(hold.credits) };
}

function signingSecretOut(secret: EndpointSigningSecrets["secrets"][number]) {
  return { key: secret.key, expiresAt: optionalTs(secret.expiresAt) };
}

const placeOf = (place: LanePlaceMessage | undefined): LanePlace => ({
  project: place?.project ?? "",
  laneId: place?.laneId ?? "",
  requestId: place?.requestId ?? "",
  targetIds: place?.targetIds ?? [],
});
