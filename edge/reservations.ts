/**
 * Reservations of immediate calls grouped per project and pool, as edge/batcher.ts groups their
 * starts (group commit). Each reservation locks its pool's row until it commits, so a project's
 * concurrent calls took turns on that row, one commit each. Now a call that finds a reservation
 * of its project and pool in flight waits for it to be answered, gathering with the others that
 * arrive meanwhile, and then they go in one control-plane call and one transaction
 * (`ReserveDeliveriesBatch`), each decided in arrival order against what the ones before it left.
 * A group that reaches `maxCalls` goes at once.
 *
 * At low load nothing waits: a call that finds nothing in flight reserves at once, alone, as
 * before. A delayed call always goes alone (its place under the waiting cap is its own
 * transaction), and so does a call that holds nothing.
 */
import type { CallReservation, ReservationRefusal } from "../core/billing.ts";
import type { ControlPlane } from "./control.ts";

type Reserve = ControlPlane["reserveDeliveries"];

/** Calls one group carries at most: its transaction holds the pool's row for all of them. */
export const MAX_GROUPED_RESERVATIONS = 64;

interface Gathered {
  reservation: CallReservation;
  answered: (refusal: ReservationRefusal | null) => void;
  failed: (error: unknown) => void;
}

/** One project's pool: its reservations in flight, and the calls gathering behind them. */
interface Lane {
  inFlight: number;
  gathering: Gathered[];
}

export function groupedReservations(
  control: Pick<ControlPlane, "reserveDeliveries" | "reserveDeliveriesBatch">,
  maxCalls = MAX_GROUPED_RESERVATIONS,
): Reserve {
  /** By project and pool; a lane goes once its last reservation is answered. */
  const lanes = new Map<string, Lane>();

  /** Reserves `calls`: alone through the single call, else as one batch. */
  async function reserve(laneKey: string, lane: Lane, calls: Gathered[]): Promise<void> {
    const [first] = calls;
    if (!first) return;
    lane.inFlight++;
    try {
      if (calls.length === 1) {
        first.answered(await control.reserveDeliveries(first.reservation));
      } else {
        const { project, pool } = first.reservation;
        const refusals = await control.reserveDeliveriesBatch({
          project,
          pool,
          calls: calls.map(({ reservation: { requestId, holds } }) => ({ requestId, holds })),
        });
        for (const [i, call] of calls.entries()) call.answered(refusals[i] ?? null);
      }
    } catch (error) {
      for (const call of calls) call.failed(error);
    } finally {
      lane.inFlight--;
      // Whoever gathered while this one was answered goes next.
      if (lane.gathering.length > 0) flush(laneKey, lane);
      else if (lane.inFlight === 0) lanes.delete(laneKey);
    }
  }

  function flush(laneKey: string, lane: Lane): void {
    const calls = lane.gathering;
    lane.gathering = [];
    void reserve(laneKey, lane, calls);
  }

  return (reservation) => {
    if (reservation.notBefore || reservation.holds.length === 0 || maxCalls <= 1) {
      return control.reserveDeliveries(reservation);
    }
    const laneKey = `${reservation.project}/${reservation.pool}`;
    const busy = lanes.get(laneKey);
    return new Promise((answered, failed) => {
      const call = { reservation, answered, failed };
      if (busy) {
        busy.gathering.push(call);
        if (busy.gathering.length >= maxCalls) flush(laneKey, busy);
        return;
      }
      const lane: Lane = { inFlight: 0, gathering: [] };
      lanes.set(laneKey, lane);
      void reserve(laneKey, lane, [call]);
    });
  };
}
