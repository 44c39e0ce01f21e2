/**
 * The edge's cache of keys and project routing, kept current by the control plane's change
 * stream. The edge acknowledges every batch and holds a lease while it does: with a live lease
 * it answers from cache with no control-plane call; once the lease runs out (stream lost for
 * longer than RELAY_EDGE_LEASE_MS) it fails closed until it has caught up again.
 */
import { RelayError } from "../core/errors.ts";
import type { KeyRecord, RateLimit } from "../core/model.ts";
import { type Bucket, takeToken } from "../core/rate-limit.ts";
import type { ChangeBatch, ControlPlane, ProjectState } from "./control.ts";

export interface EdgeStateOptions {
  control: ControlPlane;
  edgeId: string;
  leaseMs: number;
  /** Bounds memory against callers trying random keys; least recently used go first. */
  maxKeys?: number;
  /** Monotonic milliseconds, for the lease. */
  monotonic?: () => number;
  /** Told of each key verification: answered from the cache or not. */
  onKeyLookup?: (cached: boolean) => void;
  /** Cache misses each source may cause; past it, its misses are refused (429) until refilled. */
  missesPerSource?: RateLimit;
  /** Control-plane lookups in flight at most, so misses never crowd out the lease's acks. */
  maxLookupsInFlight?: number;
}

/** Sources whose miss budget is tracked, at most; a dropped one starts with a full budget. */
const MAX_SOURCES = 10_000;

const RECONNECT_MS = 200;

export class EdgeState {
  private readonly keys = new Map<string, KeyRecord | null>();
  private readonly projects = new Map<string, ProjectState | null>();
  /** Counts applied changes. A lookup that raced a change to its own entry is not cached. */
  private epoch = 0;
  private inflight = 0;
  /** While lookups are in flight: the epoch of the last change to each entry. */
  private readonly touched = new Map<string, number>();
  private appliedSequence = -1n;
  private leaseUntil = 0;
  private clockOffsetMs = 0;
  private readonly abort = new AbortController();
  private readonly monotonic: () => number;
  private readonly maxKeys: number;
  private readonly pendingKeys = new Map<string, Promise<KeyRecord | null>>();
  /** Each source's miss budget, least recently used first. */
  private readonly missBudgets = new Map<string, Bucket>();

  constructor(private readonly options: EdgeStateOptions) {
    this.monotonic = options.monotonic ?? (() => performance.now());
    this.maxKeys = options.maxKeys ?? 100_000;
  }

  /** The control plane's clock (real time, plus the dev clock's offset when enabled). */
  now = (): Date => new Date(Date.now() + this.clockOffsetMs);

  /** `source`: who asks (an address), charged for a miss. */
  async key(
    project: string,
    keyHash: Uint8Array,
    source = "unattributed",
  ): Promise<KeyRecord | null> {
    this.requireLease();
    const id = keyId(project, keyHash);
    const hit = this.keys.has(id);
    this.options.onKeyLookup?.(hit);
    if (hit) {
      const cached = this.keys.get(id) ?? null;
      // Re-inserted, so the map's order is least recently used first.
      this.keys.delete(id);
      this.keys.set(id, cached);
      return cached;
    }
    // Callers of one key that is not cached yet share its lookup (and its cost).
    const pending = this.pendingKeys.get(id);
    if (pending) return pending;
    this.chargeMiss(source);
    const found = this.lookup(id, () => this.options.control.resolveKey(project, keyHash))
      .then((key) => {
        if (key.fresh) {
          this.keys.set(id, key.value);
          if (this.keys.size > this.maxKeys) {
            this.keys.delete(this.keys.keys().next().value as string);
          }
        }
        return key.value;
      })
      .finally(() => this.pendingKeys.delete(id));
    this.pendingKeys.set(id, found);
    return found;
  }

  /** Random keys from one source cost it, not the control plane nor other callers. */
  private chargeMiss(source: string): void {
    const limit = this.options.missesPerSource ?? { requestsPerSecond: 50, burst: 500 };
    const decision = takeToken(this.missBudgets.get(source), limit, this.monotonic());
    this.missBudgets.delete(source);
    this.missBudgets.set(source, decision.bucket);
    if (this.missBudgets.size > MAX_SOURCES) {
      this.missBudgets.delete(this.missBudgets.keys().next().value as string);
    }
    if (!decision.allowed) {
      throw new RelayError(
        "rate_limited",
        "too many uncached API keys from this address; retry later",
      );
    }
    if (this.inflight >= (this.options.maxLookupsInFlight ?? 32)) {
      throw new RelayError("unavailable", "this edge is busy looking up keys; retry");
    }
  }

  async project(slug: string): Promise<ProjectState | null> {
    this.requireLease();
    if (this.projects.has(slug)) return this.projects.get(slug) ?? null;
    const state = await this.lookup(projectId(slug), () => this.options.control.projectState(slug));
    if (state.fresh) this.projects.set(slug, state.value);
    return state.value;
  }

  /**
   * A cache miss, answered by the control plane. `fresh` is false when a change to the same
   * entry was applied meanwhile: the answer may predate it, so it is not cached. A control
   * plane that cannot answer is a 503, like a lost lease.
   */
  private async lookup<T>(
    id: string,
    fetch: () => Promise<T>,
  ): Promise<{ value: T; fresh: boolean }> {
    const epoch = this.epoch;
    this.inflight++;
    try {
      const value = await fetch();
      return { value, fresh: (this.touched.get(id) ?? -1) <= epoch };
    } catch {
      throw new RelayError("unavailable", "this edge cannot reach the control plane; retry");
    } finally {
      if (--this.inflight === 0) this.touched.clear();
    }
  }

  /** Follows the change stream; resolves once the first batch is applied and acknowledged. */
  start(): Promise<void> {
    return new Promise((ready) => {
      void this.follow(ready);
    });
  }

  stop(): void {
    this.abort.abort();
  }

  /** Whether the lease is live: the edge has kept up with the control plane's changes. */
  caughtUp(): boolean {
    return this.monotonic() < this.leaseUntil;
  }

  private requireLease(): void {
    if (!this.caughtUp()) {
      throw new RelayError("unavailable", "this edge is catching up with the control plane; retry");
    }
  }

  private async follow(ready: () => void): Promise<void> {
    const { control, edgeId, leaseMs } = this.options;
    while (!this.abort.signal.aborted) {
      try {
        for await (const batch of control.watch(edgeId, this.appliedSequence, this.abort.signal)) {
          this.apply(batch);
          const sentAt = this.monotonic();
          await control.ack(edgeId, batch.headSequence, leaseMs);
          this.leaseUntil = sentAt + leaseMs;
          ready();
        }
      } catch {
        // Lost the stream: keep serving from cache until the lease runs out, and reconnect.
      }
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
    }
  }

  private apply(batch: ChangeBatch): void {
    this.clockOffsetMs = batch.clockOffsetMs;
    for (const change of batch.changes) {
      this.epoch++;
      const id =
        change.kind === "routing"
          ? projectId(change.project)
          : keyId(change.project, change.key.keyHash);
      if (this.inflight > 0) this.touched.set(id, this.epoch);
      if (change.kind === "routing") this.projects.delete(change.project);
      else if (this.keys.has(id)) this.keys.set(id, change.key);
    }
    this.appliedSequence = batch.headSequence;
  }
}

/**
 * Joined, not concatenated: `+=` and template literals make a tree of the pieces (V8's cons
 * strings), which a cached id keeps whole, about 1.6 KB for a key's instead of 150 bytes.
 */
const keyId = (project: string, keyHash: Uint8Array) => ["k", project, hex(keyHash)].join(":");
const projectId = (slug: string) => `p:${slug}`;

const HEX_BYTES = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => HEX_BYTES[byte]).join("");
}
