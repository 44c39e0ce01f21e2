/**
 * Adaptive batching of async starts, as a database batches commits (group commit). A workflow per
 * request costs Temporal and the worker about 24 ms of CPU here; a workflow carrying 32 requests
 * about 1.7 ms each (docs/benchmarks.md, Batch probe). So a call that finds a start of its project
 * in flight waits for that start to be answered, gathering with the project's other calls that
 * arrive meanwhile, and then they start together, one batch workflow (or their own, when alone);
 * a batch that reaches `maxItems` starts at once. Each caller gets its 202 once its start is
 * durable, as with its own. The batch's size follows the load: the more calls arrive while one
 * start is answered, the more share the next, and a call waits at most one start's time more.
 *
 * At low load nothing waits: a call that finds nothing in flight starts at once, on its own, so a
 * caller sending one call at a time always takes today's path. Calls with an Idempotency-Key, a
 * delay or a large body always do too: their workflow id, timer or stored body is theirs alone.
 */
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { BatchStarter, WorkflowStarter } from "./temporal.ts";

export interface BatchOptions {
  /** Requests one batch carries at most; 1 turns batching off (RELAY_BATCH_MAX_ITEMS). */
  maxItems: number;
  /** Told how many calls each start carried once it was answered (a metric). */
  onStarted?: (requests: number) => void;
}

/**
 * Body bytes (base64) a request may bring into a batch, and a batch in all: the batch's input
 * holds each body, and Temporal warns past 256 KiB a payload and refuses 2 MB.
 */
const BATCHABLE_BODY_CHARS = 16 * 1024;
const BATCH_BODY_CHARS = 256 * 1024;

interface Gathered {
  input: DeliveryInput;
  trace: TraceContext;
  accepted: (status: Accepted) => void;
  refused: (error: unknown) => void;
}

/** One project's starts in flight, and the calls gathering behind them. */
interface Lane {
  startsInFlight: number;
  gathering: Gathered[];
  bodyChars: number;
}

export function withBatching(
  starter: WorkflowStarter & BatchStarter,
  options: BatchOptions,
): WorkflowStarter {
  /** Projects with a start in flight; a lane goes once its last start is answered. */
  const lanes = new Map<string, Lane>();

  /** Starts `calls` in the lane: their own workflow when alone, else one batch. */
  async function start(project: string, lane: Lane, calls: Gathered[]): Promise<void> {
    const [first] = calls;
    if (!first) return;
    lane.startsInFlight++;
    try {
      if (calls.length === 1) await starter.startDelivery(first.input, first.trace);
      // The batch's spans continue its first call's trace.
      else await starter.startBatch({ project, requests: calls.map((c) => c.input) }, first.trace);
      options.onStarted?.(calls.length);
      for (const call of calls) call.accepted(acceptedStatus(call.input));
    } catch (error) {
      for (const call of calls) call.refused(error);
    } finally {
      lane.startsInFlight--;
      // Whoever gathered while this start was answered starts next.
      if (lane.gathering.length > 0) flush(project, lane);
      else if (lane.startsInFlight === 0) lanes.delete(project);
    }
  }

  function flush(project: string, lane: Lane): void {
    const calls = lane.gathering;
    lane.gathering = [];
    lane.bodyChars = 0;
    void start(project, lane, calls);
  }

  function gather(input: DeliveryInput, trace: TraceContext, lane: Lane): Promise<Accepted> {
    if (lane.bodyChars + input.bodyBase64.length > BATCH_BODY_CHARS) flush(input.project, lane);
    return new Promise((accepted, refused) => {
      lane.gathering.push({ input, trace, accepted, refused });
      lane.bodyChars += input.bodyBase64.length;
      if (lane.gathering.length >= options.maxItems) flush(input.project, lane);
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
      if (own) {
        return starter.startDelivery(input, trace, bodyTag).then((status) => {
          options.onStarted?.(1);
          return status;
        });
      }
      const busy = lanes.get(input.project);
      if (busy) return gather(input, trace, busy);
      const lane: Lane = { startsInFlight: 0, gathering: [], bodyChars: 0 };
      lanes.set(input.project, lane);
      return new Promise((accepted, refused) => {
        void start(input.project, lane, [{ input, trace, accepted, refused }]);
      });
    },
  };
}
