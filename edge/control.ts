/**
 * The edge's view of the control plane, over Connect: keys by hash, a project's routing or one
 * endpoint's, the reservations of calls that hold credits or wait, where large bodies and
 * finished streams go, and this edge's shares of endpoints' rate limits.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import type {
  BatchReservation,
  CallReservation,
  CallsAcceptance,
  CallsAccepted,
  ReservationRefusal,
} from "../core/billing.ts";
import type { SkippedRecord, StreamRecord } from "../core/delivery.ts";
import { claimOutcomeOf, type KeyClaim, type KeyClaimOutcome } from "../core/idempotency.ts";
import type { LanePlace } from "../core/lanes.ts";
import { planProjectRateLimits } from "../core/limits.ts";
import type { Endpoint, KeyMode, KeyRecord, Plan, RateLimit } from "../core/model.ts";
import { keyModes, plans } from "../core/model.ts";
import type { PayloadKey } from "../core/payload-codec.ts";
import type { EndpointDemand } from "../core/rate-shares.ts";
import type { SigningKey } from "../core/signing.ts";
import {
  EdgeService,
  type ProjectState as ProjectStateMessage,
  ReserveRefusal,
} from "../gen/relay/v1/edge_pb.ts";
import {
  batchOut,
  endpointFrom,
  holdOut,
  keyFrom,
  refusalsIn,
  signingKeysFrom,
} from "./control-messages.ts";

export interface ProjectState {
  plan: Plan;
  /** By `{line}/{path}`. The edge's cache swaps one in when only that one changed. */
  endpoints: Map<string, Endpoint>;
  defaultRateLimit: RateLimit;
  /** Metered pools with no credits left. */
  exhaustedPools: KeyMode[];
  /** Each endpoint's signing keys by `{line}/{path}`, for the streams the edge proxies. */
  signingKeys: Map<string, SigningKey[]>;
  /** The project's cap on scheduled and held deliveries. */
  maxWaitingDeliveries: number;
  /** Its held deliveries reached the cap: async calls are refused until some are let go. */
  heldDeliveriesFull: boolean;
  /** Targets whose deliveries are held now: a call to one reserves its place under the cap. */
  heldTargetIds: ReadonlySet<string>;
  /** Calls per second over all the project's endpoints, beside each endpoint's own limit. */
  projectRateLimit: RateLimit;
}

export interface ChangeBatch {
  changes: (
    | { project: string; kind: "key"; key: KeyRecord & { keyHash: Uint8Array } }
    | { project: string; kind: "routing" }
    | { project: string; kind: "endpoint"; line: string; path: string }
  )[];
  headSequence: bigint;
  clockOffsetMs: number;
}

export interface EndpointState {
  /** Null: the project has no such endpoint (any more). */
  endpoint: Endpoint | null;
  signingKeys: SigningKey[];
}

export interface RateShareAnswer {
  /** This edge's fraction of each reported endpoint's limit, in the report's order. */
  fractions: number[];
  /** Edges with a live lease: without a fresh share, an endpoint gets 1/liveEdges. */
  liveEdges: number;
}

/** A report waits for its answer this long at most; the next one follows a second later. */
const RATE_SHARES_TIMEOUT_MS = 2000;

export interface ControlPlane {
  resolveKey(project: string, keyHash: Uint8Array): Promise<KeyRecord | null>;
  projectState(project: string): Promise<ProjectState | null>;
  /** One endpoint's state, after a change to it alone. */
  endpointState(project: string, line: string, path: string): Promise<EndpointState>;
  watch(edgeId: string, afterSequence: bigint, signal: AbortSignal): AsyncIterable<ChangeBatch>;
  ack(edgeId: string, sequence: bigint, leaseMs: number): Promise<void>;
  /** Keeps a large body for the worker; answers its reference. */
  storeBody(project: string, requestId: string, body: Uint8Array): Promise<string>;
  /** Logs and bills a finished stream; a repeat of one already logged changes nothing. */
  recordStream(record: StreamRecord): Promise<void>;
  /** Logs a call every target skipped; a repeat of one already logged changes nothing. */
  recordSkipped(record: SkippedRecord): Promise<void>;
  /** Null when reserved. */
  reserveDeliveries(reservation: CallReservation): Promise<ReservationRefusal | null>;
  /** Immediate calls of one project and pool together: each one's refusal (null: reserved). */
  reserveDeliveriesBatch(batch: BatchReservation): Promise<(ReservationRefusal | null)[]>;
  /** Immediate calls reserved and their workflow's start kept, so they may be answered first. */
  acceptCalls(acceptance: CallsAcceptance): Promise<CallsAccepted>;
  /** Claims a call's Idempotency-Key as it goes as a workflow of its own (ClaimIdempotencyKey). */
  claimIdempotencyKey(project: string, claim: KeyClaim): Promise<KeyClaimOutcome>;
  /** An ordered call takes its place in its lane; false when it was there already. */
  joinLane(place: LanePlace): Promise<boolean>;
  /** A call joined and then not started leaves its lane. */
  leaveLane(place: LanePlace): Promise<void>;
  /** Gives back what a reservation holds for deliveries that were not queued after all. */
  releaseDeliveries(project: string, requestId: string, targetIds: string[]): Promise<void>;
  /** The payload codec's keys, newest first (core/payload-codec.ts). */
  /** The payload codec's keys, and the deployment's id key (core/id-digest.ts; empty: none). */
  payloadKeys(): Promise<{ keys: PayloadKey[]; idKey: Uint8Array<ArrayBuffer> }>;
  /** Reports demand since the last report; answers this edge's shares (core/rate-shares.ts). */
  exchangeRateShares(edgeId: string, demands: EndpointDemand[]): Promise<RateShareAnswer>;
}

export function connectControlPlane(options: {
  baseUrl: string;
  edgeToken: string;
  /** Carries the change stream, whose answer streams. */
  fetch: typeof fetch;
  /**
   * Carries every other call, whose answers are read whole: a runtime's cheaper fetch for those
   * (`Runtime.wholeFetch`); `fetch` without it.
   */
  unaryFetch?: typeof fetch;
}): ControlPlane {
  const clientOver = (over: typeof fetch): Client<typeof EdgeService> =>
    createClient(
      EdgeService,
      createConnectTransport({
        baseUrl: options.baseUrl,
        useBinaryFormat: true,
        fetch: over,
        interceptors: [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${options.edgeToken}`);
            return next(req);
          },
        ],
      }),
    );
  const client = clientOver(options.unaryFetch ?? options.fetch);
  const changes = options.unaryFetch ? clientOver(options.fetch) : client;
  return {
    async resolveKey(project, keyHash) {
      const { key } = await client.resolveKey({ project, keyHash });
      return key ? keyFrom(key) : null;
    },
    async projectState(project) {
      const { state } = await client.getProjectState({ project });
      return state ? await stateFrom(state) : null;
    },
    async endpointState(project, line, path) {
      const { endpoint, signingSecrets } = await client.getEndpointState({ project, line, path });
      return {
        endpoint: endpoint ? endpointFrom(endpoint) : null,
        signingKeys: await signingKeysFrom(signingSecrets),
      };
    },
    async *watch(edgeId, afterSequence, signal) {
      for await (const batch of changes.watchChanges({ edgeId, afterSequence }, { signal })) {
        yield {
          headSequence: batch.headSequence,
          clockOffsetMs: Number(batch.clockOffsetMs),
          changes: batch.changes.flatMap((c): ChangeBatch["changes"] => {
            if (c.change.case === "keyChanged") {
              const key = c.change.value;
              return [
                { project: c.project, kind: "key", key: { ...keyFrom(key), keyHash: key.keyHash } },
              ];
            }
            if (c.change.case !== "routingChanged") return [];
            const { line, path } = c.change.value;
            return line && path
              ? [{ project: c.project, kind: "endpoint", line, path }]
              : [{ project: c.project, kind: "routing" }];
          }),
        };
      }
    },
    async ack(edgeId, sequence, leaseMs) {
      await client.ackChanges({ edgeId, sequence, leaseMs });
    },
    async storeBody(project, requestId, body) {
      return (await client.storeBody({ project, requestId, body })).bodyRef;
    },
    async reserveDeliveries(r) {
      const answer = await client.reserveDeliveries({
        project: r.project,
        keyMode: keyModes.indexOf(r.pool) + 1,
        requestId: r.requestId,
        holds: r.holds.map(holdOut),
        ...(r.notBefore && { notBefore: timestampFromDate(r.notBefore) }),
        heldTargetIds: r.heldTargetIds ?? [],
      });
      switch (answer.refusal) {
        case ReserveRefusal.INSUFFICIENT_CREDITS:
          return { code: "insufficient_credits" };
        case ReserveRefusal.LIMIT_EXCEEDED:
          return { code: "limit_exceeded", cap: Number(answer.limit) };
        default:
          return null;
      }
    },
    async reserveDeliveriesBatch(batch) {
      const { refusals } = await client.reserveDeliveriesBatch(batchOut(batch));
      return refusalsIn(refusals, batch.calls.length);
    },
    async acceptCalls(acceptance) {
      const { refusals, accepted, claims, limit } = await client.acceptCalls({
        ...batchOut(acceptance),
        workflowId: acceptance.workflowId,
        start: acceptance.start,
        started: acceptance.started,
        bodies: acceptance.bodies ?? [],
        claims: acceptance.claims ?? [],
        lanes: acceptance.lanes ?? [],
        scheduled: (acceptance.scheduled ?? []).map(({ requestId, notBefore }) => ({
          requestId,
          notBefore: timestampFromDate(notBefore),
        })),
        joinsKeptStart: acceptance.joins !== undefined,
        joinedWorkflowId: acceptance.joins ?? "",
      });
      return {
        refusals: refusalsIn(refusals, acceptance.calls.length, Number(limit)),
        accepted,
        ...(claims.length > 0 && { claims: claims.map(claimOutcomeOf) }),
      };
    },
    async claimIdempotencyKey(project, claim) {
      return claimOutcomeOf((await client.claimIdempotencyKey({ project, claim })).outcome);
    },
    async joinLane(place) {
      return (await client.joinLane({ place })).joined;
    },
    async leaveLane(place) {
      await client.leaveLane({ place });
    },
    async releaseDeliveries(project, requestId, targetIds) {
      await client.releaseDeliveries({ project, requestId, targetIds });
    },
    async payloadKeys() {
      const answer = await client.getPayloadKeys({});
      return {
        keys: answer.keys.map(({ id, key }) => ({ id, key })),
        idKey: new Uint8Array(answer.idKey),
      };
    },
    async exchangeRateShares(edgeId, demands) {
      const answer = await client.exchangeRateShares(
        {
          edgeId,
          demands: demands.map((d) => ({
            ...d,
            accepted: BigInt(d.accepted),
            refused: BigInt(d.refused),
          })),
        },
        { timeoutMs: RATE_SHARES_TIMEOUT_MS },
      );
      return { fractions: answer.fractions, liveEdges: answer.liveEdges };
    },
    async recordStream(record) {
      await client.recordStream({
        requestId: record.requestId,
        project: record.project,
        line: record.line,
        endpoint: record.endpoint,
        keyMode: record.keyMode,
        receivedAt: timestampFromDate(new Date(record.receivedAt)),
        bodyBytes: BigInt(record.bodyBytes),
        bodyRef: record.bodyRef ?? "",
        ...(record.traceId && { traceId: record.traceId }),
        targetId: record.target.id,
        targetName: record.target.name,
        ownsStatus: record.ownsStatus,
        ...(record.statusCode !== null && { statusCode: record.statusCode }),
        latencyMs: BigInt(record.latencyMs),
        bytes: BigInt(record.bytes),
        ...(record.error !== null && { error: record.error }),
        skipped: record.skipped ?? [],
      });
    },
    async recordSkipped(record) {
      await client.recordSkipped({
        ...record,
        receivedAt: timestampFromDate(new Date(record.receivedAt)),
        bodyBytes: BigInt(record.bodyBytes),
      });
    },
  };
}

/**
 * The change stream and its acks, given up when they stay silent for `idleMs`. The control plane
 * sends a batch at least every second (a heartbeat when nothing changed), so a silent stream is a
 * dead connection (a peer gone without a FIN, a stalled proxy) that TCP alone would notice only
 * after minutes; the caller reconnects as after any lost stream, and serves from cache meanwhile.
 */
export function watchdog(control: ControlPlane, idleMs: number): ControlPlane {
  return {
    ...control,
    async *watch(edgeId, afterSequence, signal) {
      const abandoned = new AbortController();
      const batches = control
        .watch(edgeId, afterSequence, AbortSignal.any([signal, abandoned.signal]))
        [Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await withinIdle(batches.next(), idleMs, "the change stream");
          if (next.done) return;
          yield next.value;
        }
      } finally {
        abandoned.abort();
        // Not awaited: a stream that ignores the abort must not hold up the reconnect.
        batches.return?.().catch(() => {});
      }
    },
    ack: (edgeId, sequence, leaseMs) =>
      withinIdle(control.ack(edgeId, sequence, leaseMs), idleMs, "an ack"),
  };
}

function withinIdle<T>(promise: Promise<T>, idleMs: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const silence = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} was silent for ${idleMs} ms`)), idleMs);
  });
  return Promise.race([promise, silence]).finally(() => clearTimeout(timer));
}

async function stateFrom(state: ProjectStateMessage): Promise<ProjectState> {
  const signingKeys = new Map<string, SigningKey[]>();
  for (const endpoint of state.signingSecrets) {
    signingKeys.set(`${endpoint.line}/${endpoint.path}`, await signingKeysFrom(endpoint.secrets));
  }
  const plan = plans[(state.project?.plan ?? 1) - 1] ?? "free";
  return {
    signingKeys,
    plan,
    exhaustedPools: keyModes.filter((mode) =>
      mode === "live" ? state.liveCreditsExhausted : state.testCreditsExhausted,
    ),
    maxWaitingDeliveries: Number(state.maxWaitingDeliveries),
    heldDeliveriesFull: state.heldDeliveriesFull,
    heldTargetIds: new Set(state.heldTargetIds),
    // A control plane from before project rate limits sends none: the plan's applies.
    projectRateLimit: state.projectRateLimit
      ? {
          requestsPerSecond: state.projectRateLimit.requestsPerSecond,
          burst: state.projectRateLimit.burst,
        }
      : planProjectRateLimits[plan],
    defaultRateLimit: {
      requestsPerSecond: state.defaultRateLimit?.requestsPerSecond ?? 10,
      burst: state.defaultRateLimit?.burst ?? 20,
    },
    endpoints: new Map(state.endpoints.map((e) => [`${e.line}/${e.path}`, endpointFrom(e)])),
  };
}
