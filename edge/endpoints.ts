/**
 * What the edge derives from an endpoint's config: its compiled payload validator and parsed
 * allowlist, and its rate-limit bucket, which holds this edge's share of the limit
 * (./rate-shares.ts) so that the edges together allow it once. A project's own limit over all
 * its endpoints is a bucket of the same kind, under a name no endpoint has (PROJECT_WIDE).
 */
import { type Cidr, parseCidr } from "../core/ip.ts";
import type { Endpoint, JsonObject, RateLimit } from "../core/model.ts";
import { type Bucket, type RateDecision, takeToken } from "../core/rate-limit.ts";
import { limitShare } from "../core/rate-shares.ts";
import { compileSchema, type PayloadValidator } from "../core/schema.ts";
import type { RateShares } from "./rate-shares.ts";

/** The project's bucket's line and path: `*` is neither a line key nor a path. */
export const PROJECT_WIDE = { line: "*", path: "*" } as const;

export interface CompiledEndpoint {
  validate: PayloadValidator | null;
  allowlist: Cidr[];
}

/** Compiled schemas kept by their text, at most. */
const MAX_VALIDATORS = 1_000;

export class EndpointRuntime {
  /**
   * By the endpoint's own object: a change to one endpoint swaps that endpoint alone into the
   * cached project (edge/state.ts), so an edited, or deleted and recreated, endpoint is a new
   * object (a version number restarts at 1 when an endpoint is recreated) and only it compiles
   * again; the old one's compilation goes with it.
   */
  private readonly compiled = new WeakMap<Endpoint, CompiledEndpoint>();
  private readonly buckets = new Map<string, Bucket>();
  /**
   * By the schema's JSON text, least recently used first: a change to a project as a whole (or
   * a resync) brings new objects for all its endpoints, and an unchanged schema need not be
   * compiled again.
   */
  private readonly validators = new Map<string, PayloadValidator>();

  private readonly shares: Pick<RateShares, "fraction" | "count"> | null;
  private readonly maxBuckets: number;

  /**
   * `shares`: this edge's shares of the limits; without, the edge applies whole limits (an edge
   * alone, as in unit tests). `maxBuckets`: kept at most; the least recently used go first (a
   * dropped one starts full).
   */
  constructor(
    options: { shares?: Pick<RateShares, "fraction" | "count">; maxBuckets?: number } = {},
  ) {
    this.shares = options.shares ?? null;
    this.maxBuckets = options.maxBuckets ?? 100_000;
  }

  compile(endpoint: Endpoint): CompiledEndpoint {
    const cached = this.compiled.get(endpoint);
    if (cached) return cached;
    const fresh: CompiledEndpoint = {
      validate: endpoint.schema ? this.validator(endpoint.schema) : null,
      allowlist: endpoint.ipAllowlist.flatMap((text) => parseCidr(text) ?? []),
    };
    this.compiled.set(endpoint, fresh);
    return fresh;
  }

  private validator(schema: JsonObject): PayloadValidator {
    const text = JSON.stringify(schema);
    const validate = this.validators.get(text) ?? unenforceableOr(() => compileSchema(schema));
    this.validators.delete(text);
    this.validators.set(text, validate);
    if (this.validators.size > MAX_VALIDATORS) {
      this.validators.delete(this.validators.keys().next().value as string);
    }
    return validate;
  }

  /**
   * Takes a token from this edge's share of `limit`, or with `consume` false only reports the
   * bucket (for earlier refusals). RateLimit-Limit states the endpoint's burst, not the share.
   */
  rate(
    project: string,
    endpoint: Pick<Endpoint, "line" | "path">,
    limit: RateLimit,
    nowMs: number,
    consume: boolean,
  ): RateDecision {
    const id = `${project}/${endpoint.line}/${endpoint.path}`;
    const share = limitShare(limit, this.shares?.fraction(id, nowMs) ?? 1);
    const decision = { ...takeToken(this.buckets.get(id), share, nowMs), limit: limit.burst };
    if (!consume) return { ...decision, remaining: Math.floor(decision.bucket.tokens + 1) };
    this.shares?.count(id, { project, line: endpoint.line, path: endpoint.path }, decision.allowed);
    // Re-inserted, so the map's order is least recently used first.
    this.buckets.delete(id);
    this.buckets.set(id, decision.bucket);
    if (this.buckets.size > this.maxBuckets) {
      this.buckets.delete(this.buckets.keys().next().value as string);
    }
    return decision;
  }
}

/**
 * A schema saved before a bound it breaks (an RE2-incompatible pattern, say) cannot be
 * enforced; its endpoint refuses payloads, saying so, rather than failing every call with a 500.
 */
function unenforceableOr(compile: () => PayloadValidator): PayloadValidator {
  try {
    return compile();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const detail = {
      path: "/",
      message: `the endpoint's schema cannot be enforced (${reason.slice(0, 150)}); its owner must save it again`,
    };
    return () => [detail];
  }
}
