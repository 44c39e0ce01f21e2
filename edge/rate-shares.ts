/**
 * This edge's shares of endpoints' rate limits (core/rate-shares.ts). It counts the calls each
 * endpoint's rate decision saw, reports them to the control plane about once a second, and
 * holds the fractions it answers; a rate decision reads its fraction from memory and never waits
 * on the network. Without a fresh share (an endpoint not reported yet, a control plane out of
 * reach) an endpoint gets 1/N of its limit, N being the live edges the control plane last
 * counted.
 */
import {
  currentFraction,
  type EndpointDemand,
  type HeldShare,
  SHARE_EXCHANGE_MS,
  SHARE_TTL_MS,
} from "../core/rate-shares.ts";
import type { ControlPlane } from "./control.ts";

export interface RateSharesOptions {
  control: Pick<ControlPlane, "exchangeRateShares">;
  edgeId: string;
  /** Endpoints one report carries at most (the control plane's cap); the busiest go first. */
  maxReported?: number;
  /** Told of a report the control plane did not answer. */
  logError?: (fields: Record<string, unknown>, message: string) => void;
  /** Milliseconds, the clock the rate buckets use. */
  now?: () => number;
}

/** An endpoint's counts since the last report, from the first of them. */
type Counted = Omit<EndpointDemand, "intervalMs"> & { firstAtMs: number };

export class RateShares {
  /** By endpoint id (`{project}/{line}/{path}`, EndpointRuntime's). */
  private readonly held = new Map<string, HeldShare>();
  private counts = new Map<string, Counted>();
  private liveEdges = 1;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly options: RateSharesOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The fraction of `id`'s limit this edge applies at `nowMs`. */
  fraction(id: string, nowMs: number): number {
    return currentFraction(this.held.get(id), this.liveEdges, nowMs);
  }

  /** Counts a rate decision on `id`, for the next report. */
  count(id: string, endpoint: { project: string; line: string; path: string }, allowed: boolean) {
    let counted = this.counts.get(id);
    if (!counted) {
      counted = { ...endpoint, accepted: 0, refused: 0, firstAtMs: this.now() };
      this.counts.set(id, counted);
    }
    if (allowed) counted.accepted++;
    else counted.refused++;
  }

  /**
   * Reports the counts since the last answered report and takes the shares answered. A report
   * that fails keeps its counts for the next one.
   */
  async exchange(): Promise<void> {
    const sent = this.counts;
    this.counts = new Map();
    const nowMs = this.now();
    const ids = [...sent.keys()]
      .sort((a, b) => busy(sent.get(b)) - busy(sent.get(a)))
      .slice(0, this.options.maxReported ?? 10_000);
    const demands = ids.map((id): EndpointDemand => {
      const { firstAtMs, ...counted } = sent.get(id) as Counted;
      return { ...counted, intervalMs: Math.max(0, Math.round(nowMs - firstAtMs)) };
    });
    try {
      const answer = await this.options.control.exchangeRateShares(this.options.edgeId, demands);
      const receivedAtMs = this.now();
      this.liveEdges = Math.max(1, answer.liveEdges);
      for (const [i, id] of ids.entries()) {
        const fraction = answer.fractions[i];
        if (fraction !== undefined) this.held.set(id, { fraction, receivedAtMs });
      }
      for (const [id, share] of this.held) {
        if (receivedAtMs - share.receivedAtMs >= SHARE_TTL_MS) this.held.delete(id);
      }
    } catch (error) {
      for (const [id, counted] of sent) {
        const later = this.counts.get(id);
        if (later) {
          counted.accepted += later.accepted;
          counted.refused += later.refused;
        }
        this.counts.set(id, counted);
      }
      throw error;
    }
  }

  /** Takes the first shares (and the count of live edges), then exchanges about every second. */
  async start(): Promise<void> {
    await this.exchange();
    const next = () => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.exchange()
          .catch((err: unknown) => {
            // Each endpoint falls back to 1/N once its share is SHARE_TTL_MS old.
            this.options.logError?.({ err }, "rate shares: the control plane did not answer");
          })
          .finally(next);
      }, SHARE_EXCHANGE_MS);
      // The loop alone does not keep the process alive (Node; Deno's timers are numbers).
      (this.timer as { unref?: () => void }).unref?.();
    };
    next();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}

const busy = (counted: Counted | undefined) => (counted ? counted.accepted + counted.refused : 0);
