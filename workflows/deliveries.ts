/**
 * A request's deliveries as its workflow and a batch's first attempts both see them: pure, so
 * the workflow sandbox and the activities share it.
 */
import type { DeliveryInput } from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";
import type { DeliverInput, FirstAttempt } from "./activities.ts";

/** One delivery per async target of the request, in the targets' order. */
export function asyncDeliveries(input: DeliveryInput): DeliverInput[] {
  const { targets, headers, bodyBase64, body } = input;
  return targets
    .filter((target) => target.deliveryMode === "async")
    .map((target) => ({
      requestId: input.requestId,
      project: input.project,
      keyMode: input.keyMode,
      target,
      headers,
      bodyBase64,
      ...(body !== undefined && { body }),
      bodyRef: input.bodyRef,
      waitsWhenBusy: true,
    }));
}

/**
 * Whether a delivery goes on after its first attempt: to retry, to wait for its target (held)
 * or for its project's share of the worker (busy); null, a first attempt that itself failed.
 */
export function goesOn(verdict: FirstAttempt | null | undefined): boolean {
  return !verdict || verdict.kind === "retry" || verdict.kind === "held" || verdict.kind === "busy";
}

/** The targets a settle gives the credit holds back for (those not charged). */
export function targetIdsOf(deliveries: DeliverInput[]): string[] {
  return deliveries.map((delivery) => delivery.target.id);
}

/**
 * A batched request's first attempts: settled there when they ended it; else their verdicts, by
 * async target in order, with which it continues as its own workflow.
 */
export type BatchedFirst = { settled: RequestStatus } | { verdicts: (FirstAttempt | null)[] };
