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
 * transaction), as does a call to a held target (its places), and a call that holds nothing.
 */
import type { CallReservation, ReservationRefusal } from "../core/billing.ts";
import { grouped } from "../core/grouped.ts";
import type { ControlPlane } from "./control.ts";

type Reserve = ControlPlane["reserveDeliveries"];

/** Calls one group carries at most: its transaction holds the pool's row for all of them. */
export const MAX_GROUPED_RESERVATIONS = 64;

export function groupedReservations(
  control: Pick<ControlPlane, "reserveDeliveries" | "reserveDeliveriesBatch">,
  maxCalls = MAX_GROUPED_RESERVATIONS,
): Reserve {
  /** By project and pool: alone through the single call, else as one batch. */
  const reserveTogether = grouped<CallReservation, ReservationRefusal | null>({
    maxItems: maxCalls,
    async run(_, calls) {
      const [first] = calls;
      if (!first) return [];
      if (calls.length === 1) return [await control.reserveDeliveries(first)];
      const { project, pool } = first;
      return control.reserveDeliveriesBatch({
        project,
        pool,
        calls: calls.map(({ requestId, holds }) => ({ requestId, holds })),
      });
    },
  });
  return (reservation) => {
    const waits = reservation.notBefore || reservation.heldTargetIds?.length;
    if (waits || reservation.holds.length === 0 || maxCalls <= 1) {
      return control.reserveDeliveries(reservation);
    }
    return reserveTogether(`${reservation.project}/${reservation.pool}`, reservation);
  };
}
