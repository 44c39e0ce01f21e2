/**
 * Adaptive batching of async starts. A workflow per request costs Temporal and the worker about
 * 24 ms of CPU here; a workflow carrying 32 requests about 1.7 ms each (docs/benchmarks.md,
 * Batch probe). So while a project's calls come together, the edge gathers its immediate async
 * calls for a moment (`lingerMs`, or until `maxItems`) and starts one batch workflow for them;
 * each caller gets its 202 once that start is durable, as with its own.
 *
 * At low load nothing waits: a call gathers only while another start of its project is in
 * flight, or just after a batch of its project was started (its callers are coming back). A
 * caller sending one call at a time therefore always takes today's path, a workflow of its own.
 * Calls with an Idempotency-Key, a delay or a large body always do too: their workflow's id,
 * timer or stored body is theirs alone.
 */
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { BatchStarter, WorkflowStarter } from "./temporal.ts";

export interface BatchOptions {
  /** Requests one batch carries at most; 1 turns batching off (RELAY_BATCH_MAX_ITEMS). */
  maxItems: number;
  /** How long a batch gathers before it starts, unless full first (RELAY_BATCH_LINGER_MS). */
  lingerMs: number;
}

/**
 * Body bytes (base64) a request may bring into a batch, and a batch in all: the batch's input
 * holds each body, and Temporal warns past 256 KiB a payload and refuses 2 MB.
 */
const BATCHABLE_BODY_CHARS = 16 * 1024;
const BATCH_BODY_CHARS = 256 * 1024;

/** How long after a batch's start its project counts as busy: its callers' next calls gather. */
const BUSY_AFTER_BATCH_MS = 25;

interface Gathered {
  input: DeliveryInput;
  trace: TraceContext;
  accepted: (status: Accepted) => void;
  refused: (error: unknown) => void;
}

/** One project's starts: those in flight, and the batch gathering, if any. */
interface Lane {
  startsInFlight: number;
  lastBatchAt: number;
  gathering: Gathered[];
  bodyChars: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export function withBatching(
  starter: WorkflowStarter & BatchStarter,
  options: BatchOptions,
): WorkflowStarter {
  const lanes = new Map<string, Lane>();
  const laneOf = (project: string): Lane => {
    let lane = lanes.get(project);
    if (!lane) {
      lane = {
        startsInFlight: 0,
        lastBatchAt: Number.NEGATIVE_INFINITY,
        gathering: [],
        bodyChars: 0,
        timer: undefined,
      };
      lanes.set(project, lane);
    }
    return lane;
  };
  /** A lane with nothing in flight and nothing gathering is forgotten: one per busy project. */
  const forgetIdle = (project: string, lane: Lane) => {
    if (lane.startsInFlight === 0 && lane.gathering.length === 0 && !recentBatch(lane)) {
      lanes.delete(project);
    }
  };
  const recentBatch = (lane: Lane) => performance.now() - lane.lastBatchAt < BUSY_AFTER_BATCH_MS;

  async function started(project: string, lane: Lane, start: () => Promise<void>) {
    lane.startsInFlight++;
    try {
      await start();
    } finally {
      lane.startsInFlight--;
      forgetIdle(project, lane);
    }
  }

  function flush(project: string, lane: Lane): void {
    clearTimeout(lane.timer);
    const batch = lane.gathering;
    lane.gathering = [];
    lane.bodyChars = 0;
    lane.timer = undefined;
    const [first] = batch;
    if (!first) return;
    if (batch.length === 1) {
      void started(project, lane, () =>
        starter.startDelivery(first.input, first.trace).then(first.accepted, first.refused),
      );
      return;
    }
    lane.lastBatchAt = performance.now();
    // The batch's spans continue its first call's trace.
    void started(project, lane, () =>
      starter.startBatch({ project, requests: batch.map((call) => call.input) }, first.trace).then(
        () => {
          for (const call of batch) call.accepted(acceptedStatus(call.input));
        },
        (error: unknown) => {
          for (const call of batch) call.refused(error);
        },
      ),
    );
  }

  function gather(input: DeliveryInput, trace: TraceContext, lane: Lane): Promise<Accepted> {
    if (lane.bodyChars + input.bodyBase64.length > BATCH_BODY_CHARS) flush(input.project, lane);
    return new Promise((accepted, refused) => {
      lane.gathering.push({ input, trace, accepted, refused });
      lane.bodyChars += input.bodyBase64.length;
      if (lane.gathering.length >= options.maxItems) flush(input.project, lane);
      else lane.timer ??= setTimeout(() => flush(input.project, lane), options.lingerMs);
    });
  }

  return {
    ready: () => starter.ready(),
    claimSync: (project) => starter.claimSync(project),
    runSync: (input, signal, trace, bodyTag) => starter.runSync(input, signal, trace, bodyTag),
    startDelivery(input, trace, bodyTag) {
      const own =
        options.maxItems <= 1 ||
        bodyTag !== undefined ||
        input.notBefore !== undefined ||
        input.bodyBase64.length > BATCHABLE_BODY_CHARS;
      const lane = own ? undefined : laneOf(input.project);
      if (!lane) return starter.startDelivery(input, trace, bodyTag);
      const busy = lane.startsInFlight > 0 || lane.gathering.length > 0 || recentBatch(lane);
      if (busy) return gather(input, trace, lane);
      return new Promise((accepted, refused) =>
        started(input.project, lane, () =>
          starter.startDelivery(input, trace).then(accepted, refused),
        ),
      );
    },
  };
}
