/**
 * Protobuf messages <-> the plain values the operations take and answer: enums, timestamps,
 * int64s and nulls. Pure, no routing.
 */
import { type Timestamp, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { SkippedRecord, SkippedTarget, SkipReason } from "../../core/delivery.ts";
import { bodyEncodings, type LoggedBody } from "../../core/inspect.ts";
import type { KeyState } from "../../core/keys.ts";
import { orderings } from "../../core/lanes.ts";
import type { KeyMode } from "../../core/model.ts";
import {
  deliveryModes,
  type Endpoint,
  type KeyRecord,
  keyModes,
  plans,
  requestStatuses,
  roles,
} from "../../core/model.ts";
import { TRACE_ID } from "../../core/tracing.ts";
import type { RecordSkippedRequest, RecordStreamRequest } from "../../gen/relay/v1/edge_pb.ts";
import type { BodyInput, RequestFilter, Skipped } from "../../gen/relay/v1/requests_pb.ts";
import type { EndpointSpec } from "../../gen/relay/v1/routing_pb.ts";
import type { PoolUsage, Usage } from "../../store/credits.ts";
import type { KeyView } from "../../store/keys.ts";
import type { LoggedStream } from "../../store/request-log.ts";
import type { MemberView, ProjectView } from "../api/projects.ts";
import type { RequestView } from "../api/requests.ts";

/** Proto enums list the same values as the domain's, in the same order, after UNSPECIFIED. */
export function fromEnum<T extends string>(values: readonly T[], value: number): T | undefined {
  return values[value - 1];
}
export function toEnum<T extends string>(values: readonly T[], value: T): number {
  return values.indexOf(value) + 1;
}
export const ts = (date: Date) => timestampFromDate(date);
export const optionalTs = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

export const projectOut = (p: ProjectView) => ({
  ...p,
  plan: toEnum(plans, p.plan),
  createdAt: ts(p.createdAt),
});
export const memberOut = (m: MemberView) => ({
  ...m,
  role: toEnum(roles, m.role),
  createdAt: ts(m.createdAt),
  expiresAt: optionalTs(m.expiresAt),
});
/** KeyStatus's values in its proto order. */
export const keyStatuses: readonly KeyState[] = ["active", "expired_grace", "expired", "revoked"];
export const keyOut = (k: KeyView) => ({
  ...k,
  mode: toEnum(keyModes, k.mode),
  status: toEnum(keyStatuses, k.status),
  expiresAt: optionalTs(k.expiresAt),
  createdAt: ts(k.createdAt),
  predecessorId: k.predecessorId ?? undefined,
  successorId: k.successorId ?? undefined,
});
export const edgeKeyOut = (k: KeyRecord) => ({
  ...k,
  mode: toEnum(keyModes, k.mode),
  expiresAt: optionalTs(k.expiresAt),
  revokedAt: optionalTs(k.revokedAt),
});
export const endpointOut = (e: Endpoint) => ({
  ...e,
  targets: e.targets.map((t) => ({ ...t, deliveryMode: toEnum(deliveryModes, t.deliveryMode) })),
  schema: e.schema ?? undefined,
  rateLimit: e.rateLimit ?? undefined,
  circuitBreaker: e.circuitBreaker ?? undefined,
  ordering: toEnum(orderings, e.ordering),
  updatedAt: ts(e.updatedAt),
});
export const endpointIn = (spec: EndpointSpec | undefined) => ({
  path: spec?.path,
  targets: spec?.targets.map((t) => ({
    name: t.name,
    targetUrl: t.targetUrl,
    deliveryMode: fromEnum(deliveryModes, t.deliveryMode),
    timeoutSeconds: t.timeoutSeconds,
    maxDeliveriesPerSecond: t.maxDeliveriesPerSecond,
    maxConcurrent: t.maxConcurrent,
    secretHeaders: t.secretHeaders,
    headers: t.headers,
    filter: t.filter,
    transform: t.transform,
    retry: t.retry && {
      maxAttempts: t.retry.maxAttempts,
      initialIntervalSeconds: t.retry.initialIntervalSeconds,
      backoffCoefficient: t.retry.backoffCoefficient,
      maximumIntervalSeconds: t.retry.maximumIntervalSeconds,
      windowSeconds: t.retry.windowSeconds,
    },
  })),
  ipAllowlist: spec?.ipAllowlist,
  schema: spec?.schema ?? null,
  rateLimit: spec?.rateLimit ?? null,
  circuitBreaker: spec?.circuitBreaker ?? null,
  ordering: fromEnum(orderings, spec?.ordering ?? 0),
});
const poolOut = (pool: PoolUsage) => ({
  used: BigInt(pool.used),
  remaining: pool.remaining === null ? undefined : BigInt(pool.remaining),
  held: pool.held === null ? undefined : BigInt(pool.held),
});
export const usageOut = (u: Usage) => ({
  plan: u.plan,
  live: poolOut(u.pools.live),
  test: poolOut(u.pools.test),
});
const bodyOut = (b: LoggedBody) => ({
  encoding: toEnum(bodyEncodings, b.encoding),
  text: b.text,
  bytes: BigInt(b.bytes),
});
export const requestOut = (r: RequestView) => ({
  ...r,
  status: toEnum(requestStatuses, r.status),
  receivedAt: ts(r.receivedAt),
  notBefore: r.notBefore ? ts(r.notBefore) : undefined,
  traceId: r.traceId ?? undefined,
  updatedAt: ts(r.updatedAt),
  bodyBytes: BigInt(r.bodyBytes),
  idempotencyKey: r.idempotencyKey ?? undefined,
  resentFrom: r.resentFrom ?? undefined,
  contentErasedAt: r.contentErasedAt ? ts(r.contentErasedAt) : undefined,
  headers: r.headers ? { values: r.headers } : undefined,
  body: r.body ? bodyOut(r.body) : undefined,
  attempts: r.attempts.map((a) => ({
    ...a,
    startedAt: ts(a.startedAt),
    statusCode: a.statusCode ?? undefined,
    latencyMs: a.latencyMs ?? undefined,
    error: a.error ?? undefined,
    response: a.response ? { ...a.response, body: bodyOut(a.response.body) } : undefined,
  })),
  callbacks: (r.callbacks ?? []).map((c) => ({
    ...c,
    statusCode: c.statusCode ?? undefined,
    error: c.error ?? undefined,
    updatedAt: ts(c.updatedAt),
  })),
});

/** Timestamps as the REST query has them (RFC 3339), for the one schema that checks both. */
export const isoOf = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : undefined);

export const filterIn = (filter: RequestFilter | undefined) => ({
  status: filter?.status ? fromEnum(requestStatuses, filter.status) : undefined,
  endpoint: filter?.endpoint,
  requestId: filter?.requestId,
  idempotencyKey: filter?.idempotencyKey,
  targetStatus: filter?.targetStatus,
  receivedFrom: isoOf(filter?.receivedFrom),
  receivedTo: isoOf(filter?.receivedTo),
});

/** A body to send, as the REST body has it; an unspecified encoding is left for zod to refuse. */
export const bodyIn = (body: BodyInput | undefined) =>
  body && { encoding: fromEnum(bodyEncodings, body.encoding), text: body.text };
export const pageQuery = (req: { filter?: RequestFilter; cursor: string; limit: number }) => ({
  ...filterIn(req.filter),
  cursor: req.cursor || undefined,
  limit: req.limit || undefined,
});
export const pageOut = (page: { requests: RequestView[]; nextCursor: string }) => ({
  requests: page.requests.map(requestOut),
  nextCursor: page.nextCursor,
});

export function nullsToUndefined<T extends object>(value: T) {
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, v === null ? undefined : v]),
  ) as { [K in keyof T]: Exclude<T[K], null> | undefined };
}

/** An edge's stream record; its key mode and counts are checked by the operation. */
export function streamRecordIn(req: RecordStreamRequest): LoggedStream {
  return {
    ...requestRecordIn(req),
    ...(req.bodyRef && { bodyRef: req.bodyRef }),
    target: { id: req.targetId, name: req.targetName },
    ownsStatus: req.ownsStatus,
    statusCode: req.statusCode ?? null,
    latencyMs: Number(req.latencyMs),
    bytes: Number(req.bytes),
    error: req.error ?? null,
    ...(req.skipped.length > 0 && { skipped: skippedIn(req.skipped) }),
  };
}

/** An edge's skipped call; its fields are checked by the operation. */
export function skippedRecordIn(req: RecordSkippedRequest): SkippedRecord {
  return {
    ...requestRecordIn(req),
    ...(req.idempotencyKey && { idempotencyKey: req.idempotencyKey }),
    skipped: skippedIn(req.skipped),
  };
}

/** The request a record of a call an edge finished itself names, as every such record has it. */
function requestRecordIn(req: RecordStreamRequest | RecordSkippedRequest) {
  return {
    requestId: req.requestId,
    project: req.project,
    line: req.line,
    endpoint: req.endpoint,
    keyMode: req.keyMode as KeyMode,
    receivedAt: req.receivedAt ? timestampDate(req.receivedAt).toISOString() : "",
    bodyBytes: Number(req.bodyBytes),
    // An edge's own, but kept only in its one shape: the log links it to a trace UI.
    ...(req.traceId && TRACE_ID.test(req.traceId) && { traceId: req.traceId }),
  };
}

const skippedIn = (skipped: Skipped[]): SkippedTarget[] =>
  skipped.map((s) => ({
    targetId: s.targetId,
    targetName: s.targetName,
    reason: s.reason as SkipReason,
  }));
