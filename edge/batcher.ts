/**
 * Adaptive batching of immediate async calls (core/grouped.ts: group commit, by project). A
 * workflow per request costs Temporal and the worker about 24 ms of CPU here; a workflow carrying
 * 32 requests about 1.7 ms each (docs/benchmarks.md, Batch probe). So calls of a project that
 * arrive while one of its groups is in flight go together next: their credits reserved in one
 * control-plane call (`ReserveDeliveriesBatch`, each decided in arrival order against what the
 * ones before it left), then those that fit started in one batch workflow (or their own, when
 * alone). One gathering for both trips, not one per trip: two stages in a row each split a
 * project's callers between them, and batches held half as many calls. Each caller gets its 202
 * once its start is durable, as with its own workflow.
 *
 * A caller sending one call at a time always takes today's path: nothing of its project is in
 * flight. Calls with an Idempotency-Key, a delay, a large body, an ordering lane or a sync or
 * stream target never come here (`joinsBatch`): their workflow id, timer, stored body, place in
 * their lane or answer is theirs alone.
 */
import type { CallReservation, ReservationRefusal } from "../core/billing.ts";
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import { grouped } from "../core/grouped.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { ControlPlane } from "./control.ts";
import type { BatchStarter, WorkflowStarter } from "./temporal.ts";

export interface BatchOptions {
  /** Requests one batch carries at most (RELAY_BATCH_MAX_ITEMS). */
  maxItems: number;
  /** Told how many calls each start carried once it was answered (a metric). */
  onStarted?: (requests: number) => void;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/**
 * Body bytes (base64) a request may bring into a batch, and a batch in all: the batch's input
 * holds each body, and Temporal warns past 256 KiB a payload and refuses 2 MB.
 */
const BATCHABLE_BODY_CHARS = 16 * 1024;
const BATCH_BODY_CHARS = 256 * 1024;

/** An immediate async call, ready to start: its input, its trace and the credits it holds. */
export interface BatchedCall {
  input: DeliveryInput;
  trace: TraceContext;
  reservation: CallReservation;
}

/** A call started (what its caller is told), or refused by its reservation. */
export type BatchAnswer = { accepted: Accepted } | { refused: ReservationRefusal };

/** Reserves and starts a call with its project's others of the moment. */
export type Batch = (call: BatchedCall) => Promise<BatchAnswer>;

/**
 * Whether a call of `input` (to async targets only) may share a batch: immediate, small body,
 * unordered (an ordered call joins its lane once its own workflow runs, before its 202).
 */
export function joinsBatch(input: DeliveryInput, idempotent: boolean): boolean {
  return (
    !idempotent &&
    input.ordering === undefined &&
    input.notBefore === undefined &&
    input.bodyRef === undefined &&
    input.bodyBase64.length <= BATCHABLE_BODY_CHARS
  );
}

export function batcher(
  starter: WorkflowStarter & BatchStarter,
  control: Pick<ControlPlane, "reserveDeliveries" | "reserveDeliveriesBatch" | "releaseDeliveries">,
  options: BatchOptions,
): Batch {
  /** Each call's refusal, or null: the calls holding credits reserved per pool, in order. */
  async function reserve(calls: BatchedCall[]): Promise<(ReservationRefusal | null)[]> {
    const refusals: (ReservationRefusal | null)[] = calls.map(() => null);
    const holding = calls.flatMap((call, i) => (call.reservation.holds.length > 0 ? [i] : []));
    for (const pool of new Set(holding.map((i) => calls[i]?.reservation.pool))) {
      const ofPool = holding.filter((i) => calls[i]?.reservation.pool === pool);
      const reservations = ofPool.map((i) => (calls[i] as BatchedCall).reservation);
      const [first] = reservations;
      if (!first) continue;
      const answers = await (reservations.length === 1
        ? control.reserveDeliveries(first).then((refusal) => [refusal])
        : control.reserveDeliveriesBatch({
            project: first.project,
            pool: first.pool,
            calls: reservations.map(({ requestId, holds }) => ({ requestId, holds })),
          })
      ).catch((err: unknown) => {
        // As a lone call's (edge/steps/credits.ts): served from the cache, unreserved.
        options.logError(
          { err, project: first.project },
          "no reservation: the control plane did not answer",
        );
        return reservations.map(() => null);
      });
      ofPool.forEach((i, n) => {
        refusals[i] = answers[n] ?? null;
      });
    }
    return refusals;
  }

  /** Gives back what started calls reserved, when their start failed. */
  function release(calls: BatchedCall[]): void {
    for (const { reservation } of calls) {
      const targetIds = reservation.holds.map((h) => h.targetId);
      if (targetIds.length === 0) continue;
      control
        .releaseDeliveries(reservation.project, reservation.requestId, targetIds)
        .catch((err: unknown) => {
          options.logError(
            { err, requestId: reservation.requestId },
            "a reservation could not be given back",
          );
        });
    }
  }

  const together = grouped<BatchedCall, BatchAnswer>({
    maxItems: options.maxItems,
    fits: (gathered, call) =>
      gathered.reduce((chars, c) => chars + c.input.bodyBase64.length, 0) +
        call.input.bodyBase64.length <=
      BATCH_BODY_CHARS,
    async run(project, calls) {
      const refusals = await reserve(calls);
      const going = calls.filter((_, i) => !refusals[i]);
      const [first] = going;
      try {
        if (going.length === 1 && first) await starter.startDelivery(first.input, first.trace);
        // The batch's spans continue its first call's trace.
        else if (first) {
          await starter.startBatch({ project, requests: going.map((c) => c.input) }, first.trace);
        }
      } catch (error) {
        release(going);
        throw error;
      }
      if (going.length > 0) options.onStarted?.(going.length);
      return calls.map((call, i) => {
        const refused = refusals[i];
        return refused ? { refused } : { accepted: acceptedStatus(call.input) };
      });
    },
  });
  return (call) => together(call.input.project, call);
}
