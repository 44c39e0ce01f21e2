import { expect, test, vi } from "vitest";
import { type ChangeBatch, type ControlPlane, watchdog } from "./control.ts";
import { EdgeState } from "./state.ts";

const batch = (headSequence: bigint): ChangeBatch => ({
  changes: [],
  headSequence,
  clockOffsetMs: 0,
});
const never = <T>() => new Promise<T>(() => {});

/**
 * A control plane whose every change stream sends one batch and then goes silent, as over a
 * connection whose peer vanished without closing it: it ignores the abort, like a dead socket.
 */
function silentAfterOneBatch(options: { ackHangs?: boolean } = {}) {
  let streams = 0;
  let acks = 0;
  const control: ControlPlane = {
    resolveKey: async () => null,
    projectState: async () => null,
    endpointState: async () => ({ endpoint: null, signingKeys: [] }),
    async *watch() {
      streams++;
      yield batch(BigInt(streams));
      await never();
    },
    ack: async () => {
      acks++;
      if (options.ackHangs && acks > 1) await never();
    },
    storeBody: async () => "",
    recordStream: async () => {},
    recordSkipped: async () => {},
    reserveDeliveries: async () => null,
    reserveDeliveriesBatch: async ({ calls }) => calls.map(() => null),
    acceptCalls: async ({ calls }) => ({ refusals: calls.map(() => null), accepted: true }),
    claimIdempotencyKey: async () => "claimed",
    joinLane: async () => true,
    leaveLane: async () => {},
    releaseDeliveries: async () => {},
    payloadKeys: async () => ({ keys: [], idKey: new Uint8Array() }),
    exchangeRateShares: async () => ({ fractions: [], liveEdges: 1 }),
  };
  return { control, streams: () => streams };
}

test.each([
  ["a change stream silent for the watchdog's period is dropped and followed again", false],
  ["an ack that never returns is given up too, and the stream followed again", true],
])("%s", async (_, ackHangs) => {
  const plane = silentAfterOneBatch({ ackHangs });
  const state = new EdgeState({
    control: watchdog(plane.control, 100),
    edgeId: "t",
    leaseMs: 60_000,
  });
  await state.start();
  try {
    await vi.waitFor(() => expect(plane.streams()).toBeGreaterThanOrEqual(3), { timeout: 2000 });
  } finally {
    await state.stop();
  }
});
