/**
 * What edges ask: a key by hash, a project's routing state or one endpoint's, the change feed and
 * its acks, the log of the streams they proxied, and their shares of endpoints' rate limits. What
 * they reserve and accept before they queue calls is ./reservations.ts.
 */

import type { SkippedRecord, SkippedTarget } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { projectRateLimit } from "../../core/limits.ts";
import type { Endpoint, KeyMode, KeyRecord, Plan, RateLimit } from "../../core/model.ts";
import type { PayloadKey } from "../../core/payload-codec.ts";
import {
  DEMAND_WINDOW_MS,
  demandPerSecond,
  type EndpointDemand,
  splitEndpoint,
} from "../../core/rate-shares.ts";
import {
  ackChanges,
  type ChangeNotifier,
  keysByHash,
  MAX_LEASE_MS,
  watchChanges,
} from "../../store/changes.ts";
import { heldTargetIds } from "../../store/circuits.ts";
import { exhaustedPools } from "../../store/credits.ts";
import { limitOverrides } from "../../store/limits.ts";
import { type ProjectView, projectBySlug } from "../../store/projects.ts";
import { liveEdgeCount, recentDemand, recordDemand } from "../../store/rate-demand.ts";
import {
  type LoggedStream,
  recordSkipped as logSkipped,
  recordStream as logStream,
} from "../../store/request-log.ts";
import { loadEndpoints } from "../../store/routing.ts";
import { type EndpointSigningSecrets, projectSigningSecrets } from "../../store/signing.ts";
import { capOf, heldCount } from "../../store/waiting.ts";
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
  /** Targets whose deliveries are held now: a call to one reserves its place as it is accepted. */
  heldTargetIds: string[];
  /** Calls per second over all the project's endpoints (its plan's, or an admin's override). */
  projectRateLimit: RateLimit;
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
    heldTargetIds: await heldTargetIds(ctx.sql, id),
    projectRateLimit: projectRateLimit(view.plan, (await limitOverrides(ctx.sql, id)) ?? {}),
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

/** A call every target's filter skipped, logged (`store/request-log.ts`): nothing to bill. */
export async function recordSkipped(ctx: Ctx, record: SkippedRecord): Promise<void> {
  requireEdge(ctx.caller);
  const problem = requestProblem(record) ?? skippedProblem(record.skipped);
  if (problem) throw new RelayError("bad_request", `a skipped call's record ${problem}`);
  await logSkipped(ctx.sql, record);
}

/** An edge's own failure messages are short; a longer one is cut, not refused (it bills). */
const MAX_STREAM_ERROR_CHARS = 1_000;

function streamProblem(stream: LoggedStream): string | null {
  if (!stream.target.id) return "needs a target";
  const counts = [stream.latencyMs, stream.bytes];
  if (!counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
    return "has a negative or unsafe count";
  }
  return requestProblem(stream) ?? skippedProblem(stream.skipped ?? []);
}

/** What every record of a call an edge finished itself names: the request, as it came. */
function requestProblem(
  request: Pick<LoggedStream, "requestId" | "project" | "keyMode" | "receivedAt" | "bodyBytes">,
): string | null {
  if (!request.requestId || !request.project) return "needs a request and a project";
  if (request.keyMode !== "live" && request.keyMode !== "test") return "needs a key mode";
  if (Number.isNaN(Date.parse(request.receivedAt))) return "needs the time it was received";
  if (!Number.isSafeInteger(request.bodyBytes) || request.bodyBytes < 0) {
    return "has a negative or unsafe count";
  }
  return null;
}

/** An endpoint has at most 50 targets; each skipped one is named, with a known reason. */
function skippedProblem(skipped: readonly SkippedTarget[]): string | null {
  if (skipped.length > 50) return "names more targets than an endpoint has";
  const reasons: readonly string[] = ["filter", "transform"];
  const named = skipped.every((s) => s.targetId && s.targetName && reasons.includes(s.reason));
  return named ? null : "names a skipped target without its id, name or reason";
}

/**
 * The payload codec's keys for an edge, and the key of the ids it derives from callers' values:
 * derived from the deployment's secrets, they open only Temporal's payloads (which the edge
 * writes anyway) and key only those ids, while the secrets stay here.
 */
export function payloadKeys(ctx: Ctx): { keys: PayloadKey[]; idKey: Uint8Array<ArrayBuffer> } {
  requireEdge(ctx.caller);
  return { keys: ctx.payloadKeys, idKey: ctx.idKey };
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
