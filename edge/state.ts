/**
 * The edge's cache of keys and project routing, kept current by the control plane's change
 * stream. The edge acknowledges every batch and holds a lease while it does: with a live lease
 * it answers from cache with no control-plane call; once the lease runs out (stream lost for
 * longer than RELAY_EDGE_LEASE_MS) it fails closed until it has caught up again.
 *
 * A change to one endpoint marks that endpoint alone: the next call to it fetches it (and its
 * signing keys) and swaps it into the cached project, whose other endpoints (and their compiled
 * schemas) stay as they were. A change to the project as a whole (its plan, its pools, a line
 * deleted, a resync after missed changes) drops the project, fetched whole on its next call.
 */
import { RelayError } from "../core/errors.ts";
import type { Endpoint, KeyRecord, RateLimit } from "../core/model.ts";
import { type Bucket, takeToken } from "../core/rate-limit.ts";
import type { ChangeBatch, ControlPlane, EndpointState, ProjectState } from "./control.ts";

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

/** How long a stopping edge waits for the control plane to take its lease back. */
const RELEASE_WAIT_MS = 1000;

/** Sources whose miss budget is tracked, at most; a dropped one starts with a full budget. */
const MAX_SOURCES = 10_000;

const RECONNECT_MS = 200;

/**
 * A control-plane lookup in flight, shared by the calls that need it. A change applied to its
 * entry meanwhile marks it raced: its answer may predate the change, so it answers the calls
 * that were waiting and is not cached, and later calls start a lookup of their own.
 */
interface Lookup<T> {
  answer: Promise<T>;
  raced: boolean;
}

interface CachedProject {
  state: ProjectState;
  /** Endpoints changed since `state` was fetched: each is fetched alone at its next call. */
  stale: Set<string>;
}

interface ProjectLookup extends Lookup<ProjectState | null> {
  /** Endpoints changed while it was in flight: stale in what it caches. */
  changed: Set<string>;
}

export class EdgeState {
  private readonly keys = new Map<string, KeyRecord | null>();
  private readonly projects = new Map<string, CachedProject | null>();
  private inflight = 0;
  private readonly keyLookups = new Map<string, Lookup<KeyRecord | null>>();
  private readonly projectLookups = new Map<string, ProjectLookup>();
  /** By `{project} {line}/{path}`. */
  private readonly endpointLookups = new Map<string, Lookup<EndpointState>>();
  private appliedSequence = -1n;
  private leaseUntil = 0;
  private clockOffsetMs = 0;
  private readonly abort = new AbortController();
  private readonly monotonic: () => number;
  private readonly maxKeys: number;
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
    const pending = this.keyLookups.get(id);
    if (pending) return pending.answer;
    this.chargeMiss(source);
    return this.share(
      this.keyLookups,
      id,
      {},
      () => this.options.control.resolveKey(project, keyHash),
      (key) => {
        this.keys.set(id, key);
        if (this.keys.size > this.maxKeys) {
          this.keys.delete(this.keys.keys().next().value as string);
        }
      },
    ).answer;
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
    const cached = this.projects.get(slug);
    if (cached !== undefined) return cached?.state ?? null;
    const lookup =
      this.projectLookups.get(slug) ??
      this.share(
        this.projectLookups,
        slug,
        { changed: new Set<string>() },
        () => this.options.control.projectState(slug),
        (state, { changed }) => this.projects.set(slug, state && { state, stale: changed }),
      );
    return lookup.answer;
  }

  /**
   * The endpoint `line/path` of the project, with the project's state; null when there is no
   * such project or endpoint. An endpoint changed since the project was cached is fetched alone
   * and swapped in.
   */
  async endpoint(
    slug: string,
    line: string,
    path: string,
  ): Promise<{ projectState: ProjectState; endpoint: Endpoint } | null> {
    const projectState = await this.project(slug);
    if (!projectState) return null;
    const name = `${line}/${path}`;
    const cached = this.projects.get(slug);
    const found =
      cached?.state === projectState && cached.stale.has(name)
        ? (await this.fetchEndpoint(slug, cached, line, path)).endpoint
        : projectState.endpoints.get(name);
    return found ? { projectState, endpoint: found } : null;
  }

  private fetchEndpoint(
    slug: string,
    cached: CachedProject,
    line: string,
    path: string,
  ): Promise<EndpointState> {
    const name = `${line}/${path}`;
    const id = endpointLookupId(slug, name);
    const lookup =
      this.endpointLookups.get(id) ??
      this.share(
        this.endpointLookups,
        id,
        {},
        () => this.options.control.endpointState(slug, line, path),
        ({ endpoint, signingKeys }) => {
          // The project may have been dropped (a whole change) meanwhile: nothing to swap into.
          if (this.projects.get(slug) !== cached) return;
          const { endpoints, signingKeys: keysByEndpoint } = cached.state;
          if (endpoint) {
            endpoints.set(name, endpoint);
            keysByEndpoint.set(name, signingKeys);
          } else {
            endpoints.delete(name);
            keysByEndpoint.delete(name);
          }
          cached.stale.delete(name);
        },
      );
    return lookup.answer;
  }

  /**
   * Starts a cache miss's lookup under `id` in `lookups`, for the calls that need it to share;
   * `cache` keeps its answer unless a change raced it. A control plane that cannot answer is a
   * 503, like a lost lease.
   */
  private share<T, L extends Lookup<T>>(
    lookups: Map<string, L>,
    id: string,
    fields: Omit<L, keyof Lookup<T>>,
    fetch: () => Promise<T>,
    cache: (value: T, lookup: L) => void,
  ): L {
    const lookup = { ...fields, raced: false } as L;
    this.inflight++;
    lookup.answer = fetch()
      .then(
        (value) => {
          if (!lookup.raced) cache(value, lookup);
          return value;
        },
        () => {
          throw new RelayError("unavailable", "this edge cannot reach the control plane; retry");
        },
      )
      .finally(() => {
        this.inflight--;
        if (lookups.get(id) === lookup) lookups.delete(id);
      });
    lookups.set(id, lookup);
    return lookup;
  }

  /** Follows the change stream; resolves once the first batch is applied and acknowledged. */
  start(): Promise<void> {
    return new Promise((ready) => {
      void this.follow(ready);
    });
  }

  /**
   * Stops following and gives the lease back (an ack asking for 1 ms), so the control plane
   * counts this edge out at once: a revocation waits for it no longer, and its share of each
   * rate limit goes to the edges still serving. It serves no key after this.
   */
  async stop(): Promise<void> {
    this.abort.abort();
    this.leaseUntil = 0;
    const { control, edgeId } = this.options;
    // Best effort and brief: a control plane that does not answer lets the lease run out.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      control.ack(edgeId, this.appliedSequence, 1).catch(() => {}),
      new Promise((resolve) => {
        timer = setTimeout(resolve, RELEASE_WAIT_MS);
      }),
    ]).finally(() => clearTimeout(timer));
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
      const { project } = change;
      if (change.kind === "key") {
        const id = keyId(project, change.key.keyHash);
        race(this.keyLookups, id);
        if (this.keys.has(id)) this.keys.set(id, change.key);
      } else if (change.kind === "endpoint") {
        const name = `${change.line}/${change.path}`;
        race(this.endpointLookups, endpointLookupId(project, name));
        this.projectLookups.get(project)?.changed.add(name);
        this.projects.get(project)?.stale.add(name);
      } else {
        race(this.projectLookups, project);
        for (const id of this.endpointLookups.keys()) {
          if (id.startsWith(endpointLookupId(project, ""))) race(this.endpointLookups, id);
        }
        this.projects.delete(project);
        // A project deleted takes its keys along: looked up again, they are wrong keys.
        const keys = keyId(project, new Uint8Array());
        for (const id of this.keys.keys()) if (id.startsWith(keys)) this.keys.delete(id);
        for (const id of this.keyLookups.keys()) if (id.startsWith(keys)) race(this.keyLookups, id);
      }
    }
    this.appliedSequence = batch.headSequence;
  }
}

/**
 * Joined, not concatenated: `+=` and template literals make a tree of the pieces (V8's cons
 * strings), which a cached id keeps whole, about 1.6 KB for a key's instead of 150 bytes.
 */
const keyId = (project: string, keyHash: Uint8Array) => ["k", project, hex(keyHash)].join(":");
const endpointLookupId = (slug: string, name: string) => `${slug} ${name}`;

/** A change reached the entry a lookup in flight fetches: see Lookup. */
function race(lookups: Map<string, Lookup<unknown>>, id: string): void {
  const lookup = lookups.get(id);
  if (!lookup) return;
  lookup.raced = true;
  lookups.delete(id);
}

const HEX_BYTES = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => HEX_BYTES[byte]).join("");
}
