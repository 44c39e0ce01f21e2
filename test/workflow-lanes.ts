/**
 * Ordered delivery's lanes as store/lanes.ts keeps them, in memory, for the mocked worker
 * (./workflow-worker.ts): per lane and target the requests in join order; the head has the turn,
 * the others park under their carrier (a batch, or their own workflow), which is signalled when
 * the turn comes. The real stack's: test/ordered-delivery.test.ts.
 */
import type { Client } from "@temporalio/client";
import { signalTurns } from "../platform/temporal.ts";
import type { LaneClaim, Turn, TurnGiven } from "../store/lanes.ts";

interface Entry {
  requestId: string;
  turn: boolean;
  parked: boolean;
  carrier?: string | undefined;
}

const lanes = new Map<string, Entry[]>();

function queueOf(laneId: string, targetId: string): Entry[] {
  const key = `${laneId}\n${targetId}`;
  const queue = lanes.get(key) ?? [];
  lanes.set(key, queue);
  return queue;
}

/** A request joins its lane at each target, as an edge joins one before its start. */
export function joinLaneAsEdge(laneId: string, requestId: string, targetIds: string[]): void {
  for (const targetId of targetIds) {
    const queue = queueOf(laneId, targetId);
    if (!queue.some((e) => e.requestId === requestId)) {
      queue.push({ requestId, turn: false, parked: false });
    }
  }
}

/** Turns claimed (`claimTurnsInOrder`): a head takes it, the others park under `carrier`. */
export function claimTurns(claims: LaneClaim[], carrier?: string): Record<string, Turn>[] {
  return claims.map(({ laneId, requestId, targetIds }) =>
    Object.fromEntries(
      targetIds.map((targetId) => {
        const queue = queueOf(laneId, targetId);
        const entry = queue.find((e) => e.requestId === requestId);
        if (!entry) return [targetId, "turn"];
        if (queue[0] === entry) entry.turn = true;
        else if (!entry.turn) Object.assign(entry, { parked: true, carrier });
        return [targetId, entry.turn ? "turn" : "wait"];
      }),
    ),
  );
}

/**
 * Requests leave their lanes (`passTurns`): each target's next request gets the turn; those
 * `keep` keeps are answered, the other parked ones' carriers told (one signal per batch).
 */
export async function passTurns(
  client: Client,
  leaving: LaneClaim[],
  keep: (given: TurnGiven) => boolean = () => false,
): Promise<TurnGiven[]> {
  const given: TurnGiven[] = [];
  for (const { laneId, requestId, targetIds } of leaving) {
    for (const targetId of targetIds) {
      const queue = queueOf(laneId, targetId);
      const at = queue.findIndex((e) => e.requestId === requestId);
      if (at >= 0) queue.splice(at, 1);
      const [head] = queue;
      if (!head) continue;
      head.turn = true;
      const workflowId = head.carrier ?? head.requestId;
      if (head.parked) given.push({ laneId, requestId: head.requestId, targetId, workflowId });
    }
  }
  await signalTurns(
    client,
    given.filter((g) => !keep(g)),
  );
  return given.filter(keep);
}

/** The carrier a request waits under for its turn at some target, if it waits. */
export function parkedUnder(requestId: string): string | undefined {
  for (const queue of lanes.values()) {
    const entry = queue.find((e) => e.requestId === requestId && e.parked && !e.turn);
    if (entry) return entry.carrier ?? entry.requestId;
  }
  return undefined;
}
