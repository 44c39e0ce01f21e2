/**
 * Adaptive batching of async starts (core/grouped.ts: group commit, by project). A workflow per
 * request costs Temporal and the worker about 24 ms of CPU here; a workflow carrying 32 requests
 * about 1.7 ms each (docs/benchmarks.md, Batch probe). So calls of a project that arrive while
 * one of its starts is in flight start together next, in one batch workflow (or their own, when
 * alone); each caller gets its 202 once its start is durable, as with its own.
 *
 * A caller sending one call at a time always takes today's path: nothing of its project is in
 * flight. Calls with an Idempotency-Key, a delay or a large body always do too: their workflow
 * id, timer or stored body is theirs alone.
 */
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import { grouped } from "../core/grouped.ts";
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

/** A call's input and the trace its start continues. */
interface Call {
  input: DeliveryInput;
  trace: TraceContext;
}

export function withBatching(
  starter: WorkflowStarter & BatchStarter,
  options: BatchOptions,
): WorkflowStarter {
  const started = (calls: number) => options.onStarted?.(calls);
  const startTogether = grouped<Call, Accepted>({
    maxItems: options.maxItems,
    fits: (gathered, call) =>
      gathered.reduce((chars, c) => chars + c.input.bodyBase64.length, 0) +
        call.input.bodyBase64.length <=
      BATCH_BODY_CHARS,
    async run(project, calls) {
      const [first] = calls;
      if (!first) return [];
      if (calls.length === 1) await starter.startDelivery(first.input, first.trace);
      // The batch's spans continue its first call's trace.
      else await starter.startBatch({ project, requests: calls.map((c) => c.input) }, first.trace);
      started(calls.length);
      return calls.map((call) => acceptedStatus(call.input));
    },
  });

  return {
    ready: () => starter.ready(),
    claimSync: (project) => starter.claimSync(project),
    runSync: (input, signal, trace, bodyTag) => starter.runSync(input, signal, trace, bodyTag),
    async startDelivery(input, trace, bodyTag) {
      const own =
        options.maxItems <= 1 ||
        bodyTag !== undefined ||
        input.notBefore !== undefined ||
        input.bodyBase64.length > BATCHABLE_BODY_CHARS;
      if (!own) return startTogether(input.project, { input, trace });
      const status = await starter.startDelivery(input, trace, bodyTag);
      started(1);
      return status;
    },
  };
}
