/**
 * What the edge handler is built from (its dependencies, given by boot, an adapter or a test) and
 * what it tells of each answer. They live apart from ./app.ts, which assembles the steps, so that
 * the steps below it can take them.
 */

import type { StreamRecord } from "../core/delivery.ts";
import type { IdDigest } from "../core/id-digest.ts";
import type { Cidr } from "../core/ip.ts";
import type { Hmac } from "../core/signing.ts";
import type { CallTarget } from "../core/target-request.ts";
import type { RunTransform } from "../core/transform.ts";
import type { Batch } from "./batched-calls.ts";
import type { ControlPlane } from "./control.ts";
import type { RateShares } from "./rate-shares.ts";
import type { SpareHolds } from "./spare-holds.ts";
import type { EdgeState } from "./state.ts";
import type { WorkflowStarter } from "./temporal.ts";

export interface EdgeDeps {
  state: Pick<EdgeState, "key" | "endpoint" | "now">;
  /** `RELAY_EDGE_DOMAIN`: the only hosts served are `{project}.{domain}`; also the CDN-Loop mark. */
  edgeDomain: string;
  /** SHA-256 of the presented key. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hashKey?: (plaintext: string) => Uint8Array | Promise<Uint8Array>;
  /** Signs streams' deliveries. Adapters pass their runtime's fastest (Web Crypto's by default). */
  hmac?: Hmac;
  /** Checks schedules' fire tokens (core/schedules.ts); absent, no call is a fire. */
  fireKey?: CryptoKey;
  temporal: WorkflowStarter;
  /**
   * Reserves and starts an immediate async call with its project's others of the moment
   * (./batcher.ts); absent when batching is off (RELAY_BATCH_MAX_ITEMS=1): each goes alone.
   */
  batch?: Batch;
  /** Takes a finished stream to be logged and billed (./stream-records.ts); never throws. */
  recordStream: (record: StreamRecord) => void;
  /** Logs a call every target skipped (control plane): readable once it is answered. */
  recordSkipped: ControlPlane["recordSkipped"];
  /** Keeps a body too large for Temporal's payloads; answers its reference. */
  storeBody: (project: string, requestId: string, body: Uint8Array) => Promise<string>;
  /** Claims the Idempotency-Key of a call that goes as a workflow of its own (control plane). */
  claimIdempotencyKey: ControlPlane["claimIdempotencyKey"];
  /** An ordered call's place in its lane, taken before its start; left if the start fails. */
  joinLane: ControlPlane["joinLane"];
  leaveLane: ControlPlane["leaveLane"];
  /** Holds a call's credits and a delayed call's place before it is queued (control plane). */
  reserveDeliveries: ControlPlane["reserveDeliveries"];
  releaseDeliveries: ControlPlane["releaseDeliveries"];
  /** Stream calls' credit holds made one call ahead (./spare-holds.ts); without, each reserves. */
  spareHolds?: SpareHolds;
  /** Reaches stream targets: pooled, and connecting only to addresses the target rules allow. */
  callTarget: CallTarget;
  /** Private addresses are targets too (dev stacks, tests): for checking callbacks' URLs. */
  allowPrivateTargets?: boolean;
  /** Runs a stream target's transformation (the runtime's sandbox threads). */
  transform: RunTransform;
  newRequestId: () => string;
  /** Digests the ids derived from callers' values: keyed with the deployment's id key. */
  idDigest: IdDigest;
  maxBodyBytes: number;
  /** A body still arriving after this long is refused (408). */
  bodyTimeoutMs?: number;
  /** Peers whose X-Forwarded-For is believed. */
  trustedProxies?: Cidr[];
  /** Told of every answer, for the log and the metrics. */
  observe?: (answered: Answered) => void;
  /** Where failures of Relay's own go (a structured logger's `error`). */
  logError: (fields: Record<string, unknown>, message: string) => void;
  /** This edge's shares of endpoints' rate limits; without, whole limits (an edge alone). */
  rateShares?: RateShares;
}

/** The status logged and counted for a call whose caller hung up before its answer. */
export const CALLER_LEFT = 499;

/** One inbound call, answered. The endpoint is named only once it was found. */
export interface Answered {
  status: number;
  requestId: string | null;
  project: string | null;
  /** `{line}/{endpoint}`. */
  endpoint: string | null;
  /** Until the answer's headers (a stream runs on after). */
  seconds: number;
  /** The call's trace, when the edge exports traces: the log line leads to it. */
  traceId?: string | undefined;
}
