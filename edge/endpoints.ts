/**
 * What the edge derives from an endpoint's config, once per endpoint version: its compiled
 * payload validator and parsed allowlist, and its rate-limit bucket (per edge instance).
 */
import { type Cidr, parseCidr } from "../core/ip.ts";
import type { Endpoint, RateLimit } from "../core/model.ts";
import { type Bucket, type RateDecision, takeToken } from "../core/rate-limit.ts";
import { compileSchema, type PayloadValidator } from "../core/schema.ts";

export interface CompiledEndpoint {
  version: number;
  validate: PayloadValidator | null;
  allowlist: Cidr[];
}

export class EndpointRuntime {
  private readonly compiled = new Map<string, CompiledEndpoint>();
  private readonly buckets = new Map<string, Bucket>();

  /** Compiled at most once per endpoint version; a new version replaces the old. */
  compile(project: string, endpoint: Endpoint): CompiledEndpoint {
    const id = endpointId(project, endpoint);
    const cached = this.compiled.get(id);
    if (cached?.version === endpoint.version) return cached;
    const fresh: CompiledEndpoint = {
      version: endpoint.version,
      validate: endpoint.schema ? compileSchema(endpoint.schema) : null,
      allowlist: endpoint.ipAllowlist.flatMap((text) => parseCidr(text) ?? []),
    };
    this.compiled.set(id, fresh);
    return fresh;
  }

  /** Takes a token, or with `consume` false only reports the bucket (for earlier refusals). */
  rate(
    project: string,
    endpoint: Endpoint,
    limit: RateLimit,
    nowMs: number,
    consume: boolean,
  ): RateDecision {
    const id = endpointId(project, endpoint);
    const decision = takeToken(this.buckets.get(id), limit, nowMs);
    if (consume) this.buckets.set(id, decision.bucket);
    return consume ? decision : { ...decision, remaining: Math.floor(decision.bucket.tokens + 1) };
  }
}

function endpointId(project: string, endpoint: Endpoint): string {
  return `${project}/${endpoint.line}/${endpoint.path}`;
}
