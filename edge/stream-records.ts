/**
 * Finished streams on their way to the control plane, which logs and bills them. A record is
 * sent once the stream ends and retried while the control plane cannot take it (a restart, a
 * deploy), with growing waits; a repeat of one it did take changes nothing. What waits is bounded:
 * past `maxPending` records, or after the last retry, a record is logged as lost.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { StreamRecord } from "../core/delivery.ts";

export interface StreamRecorderOptions {
  send: (record: StreamRecord) => Promise<void>;
  logError: (fields: Record<string, unknown>, message: string) => void;
  /** Told of each send's outcome, for the metrics. */
  observe?: (outcome: StreamRecordOutcome) => void;
  /** The waits before each retry; the record is lost after the last. */
  retryDelaysMs?: readonly number[];
  /** Records sent or waiting to be retried at once. */
  maxPending?: number;
}

/** What became of one send of a record: taken, to be tried again, or given up on. */
export type StreamRecordOutcome = "logged" | "retried" | "lost";

/** About two minutes of retries: a control plane restarting is back well within it. */
const RETRY_DELAYS_MS = [250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];
const MAX_PENDING = 10_000;

/** Worth another try: the control plane did not answer, or not yet. Not a refusal of the record. */
const TRANSIENT = new Set([
  Code.Unavailable,
  Code.DeadlineExceeded,
  Code.ResourceExhausted,
  Code.Aborted,
  Code.Unknown,
  Code.Internal,
]);

/** Answers the edge's `recordStream`: hands a record over, never throws, never blocks. */
export function streamRecorder(options: StreamRecorderOptions): (record: StreamRecord) => void {
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  const maxPending = options.maxPending ?? MAX_PENDING;
  let pending = 0;
  const observe = options.observe ?? (() => {});
  const lost = (record: StreamRecord, err: unknown) => {
    observe("lost");
    options.logError({ err, requestId: record.requestId }, "stream record lost");
  };

  async function deliver(record: StreamRecord): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await options.send(record);
        observe("logged");
        return;
      } catch (err) {
        const delay = delays[attempt];
        if (delay === undefined || !TRANSIENT.has(ConnectError.from(err).code)) {
          return lost(record, err);
        }
        observe("retried");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  return (record) => {
    if (pending >= maxPending) return lost(record, new Error(`${maxPending} records pending`));
    pending++;
    void deliver(record).finally(() => pending--);
  };
}
