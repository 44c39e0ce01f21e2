/**
 * How the edges share an endpoint's rate limit, so N edges allow the limit and not N times it.
 * Each edge reports, about once a second, how many calls it took and refused per endpoint since
 * its last report; the control plane keeps those rates in Postgres and answers each edge its
 * fraction of every endpoint it reported: a small floor split equally among the edges that
 * reported the endpoint within the demand window, the rest in proportion to their demand, so
 * the fractions sum to 1 and a busy edge gets what a single bucket would have given its callers.
 * The edge's bucket then holds that fraction of the burst and refills at that fraction of the
 * rate, with no network wait per call. Pure; time is injected.
 */
import type { RateLimit } from "./model.ts";

/** How often an edge reports its demand and takes its shares. */
export const SHARE_EXCHANGE_MS = 1000;
/** A share not renewed for this long is stale: the edge falls back (fallbackFraction). */
export const SHARE_TTL_MS = 3000;
/** Edges that reported an endpoint within this long are counted in its split. */
export const DEMAND_WINDOW_MS = 3000;
/** Part of the limit split equally among the edges counted, whatever their demand. */
export const SHARE_FLOOR = 0.1;

/** One endpoint's rate decisions on an edge since its last report (EdgeService.ExchangeRateShares). */
export interface EndpointDemand {
  project: string;
  line: string;
  path: string;
  accepted: number;
  refused: number;
  /**
   * The time the counts cover: from the first of them, so that an endpoint's first report (its
   * calls began partway through the edge's interval) counts its rate, not less.
   */
  intervalMs: number;
}

/** Counts over a shorter time are taken over this: one call just before a report is no rate. */
export const MIN_DEMAND_INTERVAL_MS = 250;

/** Calls a second that reached the rate decision, taken or refused: what the edge was asked. */
export function demandPerSecond({
  accepted,
  refused,
  intervalMs,
}: Pick<EndpointDemand, "accepted" | "refused" | "intervalMs">): number {
  return ((accepted + refused) * 1000) / Math.max(MIN_DEMAND_INTERVAL_MS, intervalMs);
}

export interface EdgeDemand {
  edgeId: string;
  perSecond: number;
}

/** The reporting edge's side of a split. */
export interface OwnDemand {
  perSecond: number;
  /** It reported this endpoint within the demand window before this report. */
  established: boolean;
}

/**
 * An edge's fraction of an endpoint's limit, among the other edges that reported it within the
 * demand window (`others`): the fractions of all of them sum to 1, but an edge's first report of
 * the endpoint gets at most the fallback of the `liveEdges`. Edges report at different moments:
 * without the cap, the edges reporting a busy endpoint after the first would each take up to
 * half of it at once while the others still apply their fallback, and together pass the limit
 * for a second.
 */
export function shareOf(own: OwnDemand, others: readonly EdgeDemand[], liveEdges: number): number {
  const total = others.reduce((sum, edge) => sum + edge.perSecond, own.perSecond);
  const even = 1 / (others.length + 1);
  const target =
    total <= 0 ? even : SHARE_FLOOR * even + (1 - SHARE_FLOOR) * (own.perSecond / total);
  if (own.established) return target;
  return Math.min(target, fallbackFraction(Math.max(liveEdges, others.length + 1)));
}

/**
 * `edgeId`'s fraction of an endpoint for its report of `perSecond` calls a second, given the
 * edges that had reported the endpoint within the demand window before (`counted`, this one
 * among them if it had).
 */
export function splitEndpoint(
  edgeId: string,
  perSecond: number,
  counted: readonly EdgeDemand[],
  liveEdges: number,
): number {
  const previous = counted.find((edge) => edge.edgeId === edgeId);
  const others = counted.filter((edge) => edge !== previous);
  return shareOf({ perSecond, established: previous !== undefined }, others, liveEdges);
}

/**
 * The fraction an edge uses without a current share (an endpoint it has not reported yet, or
 * the control plane out of reach for longer than SHARE_TTL_MS): an equal split among the live
 * edges the control plane last counted, never the whole limit while others are live.
 */
export function fallbackFraction(liveEdges: number): number {
  return 1 / Math.max(1, liveEdges);
}

/** A share held by an edge: its fraction, and when the control plane answered it. */
export interface HeldShare {
  fraction: number;
  receivedAtMs: number;
}

/** The fraction an edge applies now: its share while fresh, else the fallback. */
export function currentFraction(
  held: HeldShare | undefined,
  liveEdges: number,
  nowMs: number,
): number {
  return held && nowMs - held.receivedAtMs < SHARE_TTL_MS
    ? held.fraction
    : fallbackFraction(liveEdges);
}

/**
 * The bucket an edge keeps for its fraction of `limit`. It holds at least one token, or an edge
 * whose share of a small burst is under one could never take a call: with fewer tokens of burst
 * than edges, the edges together may pass the burst by that difference.
 */
export function limitShare(limit: RateLimit, fraction: number): RateLimit {
  return {
    requestsPerSecond: limit.requestsPerSecond * fraction,
    burst: Math.max(1, limit.burst * fraction),
  };
}
