/**
 * The control plane's messages as the edge writes and reads them (./control.ts): reservations
 * and their refusals, keys, signing secrets and endpoints.
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { BatchReservation, CreditHold, ReservationRefusal } from "../core/billing.ts";
import { orderings } from "../core/lanes.ts";
import type { Endpoint, KeyRecord, TargetRetry } from "../core/model.ts";
import { deliveryModes, keyModes } from "../core/model.ts";
import { importSigningKey, type SigningKey } from "../core/signing.ts";
import { type EdgeKey, ReserveRefusal, type SigningSecret } from "../gen/relay/v1/edge_pb.ts";
import type {
  Endpoint as EndpointMessage,
  TargetRetry as TargetRetryMessage,
} from "../gen/relay/v1/routing_pb.ts";

export function batchOut(batch: BatchReservation) {
  return {
    project: batch.project,
    keyMode: keyModes.indexOf(batch.pool) + 1,
    calls: batch.calls.map((call) => ({
      requestId: call.requestId,
      holds: call.holds.map(holdOut),
    })),
  };
}

/** Each call's refusal; `cap`: the one a delayed call's place met (AcceptCalls). */
export function refusalsIn(
  refusals: ReserveRefusal[],
  calls: number,
  cap = 0,
): (ReservationRefusal | null)[] {
  if (refusals.length !== calls) {
    throw new Error(`${refusals.length} answers to a batch of ${calls} calls`);
  }
  return refusals.map((refusal): ReservationRefusal | null => {
    if (refusal === ReserveRefusal.INSUFFICIENT_CREDITS) return { code: "insufficient_credits" };
    return refusal === ReserveRefusal.LIMIT_EXCEEDED ? { code: "limit_exceeded", cap } : null;
  });
}

export function holdOut(hold: CreditHold) {
  return { targetId: hold.targetId, credits: BigInt(hold.credits) };
}

export function keyFrom(key: EdgeKey): KeyRecord {
  return {
    id: key.id,
    project: key.project,
    mode: keyModes[key.mode - 1] ?? "live",
    expiresAt: key.expiresAt ? timestampDate(key.expiresAt) : null,
    revokedAt: key.revokedAt ? timestampDate(key.revokedAt) : null,
    successorUsable: key.successorUsable,
  };
}

export function signingKeysFrom(secrets: SigningSecret[]): Promise<SigningKey[]> {
  return Promise.all(
    secrets.map(async (secret) => ({
      key: await importSigningKey(new Uint8Array(secret.key)),
      expiresAt: secret.expiresAt ? timestampDate(secret.expiresAt) : null,
    })),
  );
}

export function endpointFrom(e: EndpointMessage): Endpoint {
  return {
    line: e.line,
    path: e.path,
    ipAllowlist: e.ipAllowlist,
    schema: e.schema ?? null,
    rateLimit: e.rateLimit
      ? { requestsPerSecond: e.rateLimit.requestsPerSecond, burst: e.rateLimit.burst }
      : null,
    ordering: orderings[e.ordering - 1] ?? "none",
    version: e.version,
    updatedAt: e.updatedAt ? timestampDate(e.updatedAt) : new Date(0),
    targets: e.targets.map((t) => ({
      id: t.id,
      name: t.name,
      targetUrl: t.targetUrl,
      deliveryMode: deliveryModes[t.deliveryMode - 1] ?? "async",
      timeoutSeconds: t.timeoutSeconds ?? 30,
      headers: t.headers,
      // Absent when none, as the control plane's own read has them (store/routing.ts).
      ...(t.maxDeliveriesPerSecond !== undefined && {
        maxDeliveriesPerSecond: t.maxDeliveriesPerSecond,
      }),
      ...(t.maxConcurrent !== undefined && { maxConcurrent: t.maxConcurrent }),
      ...(t.secretHeaders.length > 0 && { secretHeaders: t.secretHeaders }),
      ...(t.filter !== undefined && { filter: t.filter }),
      ...(t.transform !== undefined && { transform: t.transform }),
      ...(t.retry && { retry: retryFrom(t.retry) }),
    })),
  };
}

/** A target's retry settings as the control plane's own read has them: those it sets only. */
function retryFrom({ $typeName: _, ...retry }: TargetRetryMessage): TargetRetry {
  return Object.fromEntries(Object.entries(retry).filter(([, v]) => v !== undefined));
}
