/**
 * A call as it goes in a batch (../batcher.ts): its input, its acceptance, and the claim of the
 * key of one that goes alone after all. The delivery input every workflow start carries too.
 */
import { toBase64 } from "../../core/base64.ts";
import { type Accepted, type DeliveryInput, skippedTargets } from "../../core/delivery.ts";
import { notQueued } from "../../core/errors.ts";
import { forwardableHeaders } from "../../core/headers.ts";
import { type KeyClaim, keyReused } from "../../core/idempotency.ts";
import type { LaneRef } from "../../core/lanes.ts";
import { loopMark } from "../../core/loop.ts";
import { traceIdOf } from "../../core/tracing.ts";
import type { Batch, BatchedCall } from "../batched-calls.ts";
import { travelsInBatch } from "../batcher.ts";
import type { EdgeDeps } from "../deps.ts";
import { json, type Received } from "../pipeline.ts";
import { refusalError, reservationOf } from "./credits.ts";

/**
 * The call as it shares a batch. A body too large for the batch's input goes by reference,
 * stored as the call is accepted; its Idempotency-Key is claimed then too.
 */
export function batchedCall(
  deps: EdgeDeps,
  call: Received,
  requestId: string,
  claim: KeyClaim | undefined,
  ordering: LaneRef | undefined,
  /** Its targets the batch delivers: all (async) but a mirror's sync one. */
  targets: DeliveryInput["targets"],
): Pick<BatchedCall, "input" | "storedBody" | "claim" | "lane"> {
  const inline = travelsInBatch(call.body.byteLength);
  const input = deliveryInput(deps, call, requestId, inline ? undefined : requestId, ordering);
  return {
    input: { ...input, targets },
    ...(!inline && { storedBody: call.body }),
    ...(claim && { claim }),
    ...(ordering && {
      lane: {
        project: call.project,
        laneId: ordering.laneId,
        requestId,
        targetIds: targets.map((t) => t.id),
      },
    }),
  };
}

/**
 * Reserved (all of the call's targets: a mirror's sync one too) and started with the project's
 * calls of the moment; its accepted status once its start is durable. Null when the call goes
 * as a workflow of its own instead (an Idempotency-Key's, or an ordered one's, that could not
 * share the batch).
 */
export async function queueInBatch(
  batch: Batch,
  call: Received,
  batched: Pick<BatchedCall, "input" | "storedBody" | "claim" | "lane" | "mirrored">,
): Promise<Accepted | null> {
  const { requestId } = batched.input;
  call.responseHeaders.set("x-relay-request-id", requestId);
  const answer = await batch({
    ...batched,
    trace: call.trace,
    reservation: reservationOf(call, requestId),
  });
  if ("alone" in answer) return null;
  if ("refused" in answer) throw refusalError(call.key.mode, answer.refused);
  if ("unstored" in answer) throw notQueued();
  if ("reused" in answer) throw keyReused();
  return answer.accepted;
}

/**
 * Claims the key of a call that goes as a workflow of its own; its answer when the key's first
 * call shared a batch (a repeat is answered as that call was), else null: the call goes on, and
 * Temporal's workflow id tells it from its repeats. Without the claim a repeat could be
 * delivered twice, so a control plane that does not answer is a 503.
 */
export async function claimAlone(deps: EdgeDeps, call: Received, claim: KeyClaim) {
  const outcome = await deps.claimIdempotencyKey(call.project, claim).catch((err: unknown) => {
    deps.logError({ err, requestId: claim.requestId }, "an Idempotency-Key could not be claimed");
    throw notQueued();
  });
  if (outcome === "reused") throw keyReused();
  if (outcome !== "repeat") return null;
  call.responseHeaders.set("x-relay-request-id", claim.requestId);
  return json(202, { status: "queued", requestId: claim.requestId }, call.responseHeaders);
}

export function deliveryInput(
  deps: EdgeDeps,
  call: Received,
  requestId: string,
  bodyRef: string | undefined,
  ordering: LaneRef | undefined,
): DeliveryInput {
  // A skipped target's secret headers are kept out of the log too: the log is the request's.
  const everyTarget = [...call.endpoint.targets, ...(call.skipped ?? [])];
  const secretHeaders = [...new Set(everyTarget.flatMap((t) => t.secretHeaders ?? []))];
  return {
    ...requestOf(deps, call, requestId),
    headers: forwardableHeaders(call.request.headers, loopMark(deps.edgeDomain)),
    bodyBase64: bodyRef ? "" : toBase64(call.body),
    ...(bodyRef && { bodyRef }),
    ...(secretHeaders.length > 0 && { secretHeaders }),
    ...(call.skipped && { skipped: skippedTargets(call.skipped) }),
    ...(call.notBefore && { notBefore: call.notBefore.toISOString() }),
    ...(call.callbacks && { callbacks: call.callbacks }),
    // A delayed call takes its place at its time: its workflow joins then, not the edge now.
    ...(ordering && { ordering: call.notBefore ? ordering : { ...ordering, joinedAtEdge: true } }),
    targets: [],
  };
}

/** The request a call is, as the log opens it: what every record of it begins with. */
export function requestOf(deps: EdgeDeps, call: Received, requestId: string) {
  const traceId = traceIdOf(call.trace);
  return {
    requestId,
    project: call.project,
    line: call.endpoint.line,
    endpoint: call.endpoint.path,
    keyMode: call.key.mode,
    receivedAt: deps.state.now().toISOString(),
    bodyBytes: call.body.byteLength,
    ...(traceId && { traceId }),
    ...(call.idempotencyKey !== null && { idempotencyKey: call.idempotencyKey }),
  };
}
