/**
 * Batches accepted and not made yet (./batcher.ts), by group key: the group gathering behind one
 * joins it (AcceptCalls' `joinsKeptStart` replaces its kept start), so one workflow carries two
 * groups' calls where one alone would be small. Temporal's and the worker's cost is per
 * workflow, most of a batched delivery's (docs/benchmarks.md, Every kind of call).
 */
import type { Behind } from "../core/grouped.ts";
import { type BatchedCall, deliveriesOf, fitOneWorkflow, sumOf } from "./batched-calls.ts";
import type { PreparedStart } from "./temporal.ts";

/** A batch accepted and kept, not made yet: its start and the calls it carries. */
export interface OpenBatch {
  start: PreparedStart;
  calls: BatchedCall[];
}

export function openBatches(options: {
  maxItems: number;
  lingerMs: number;
  /** Makes a batch no group joined after all, as it was kept. */
  made: (batch: OpenBatch) => void;
}) {
  const open = new Map<string, OpenBatch>();
  return {
    /**
     * Takes the open batch of `key` for `calls` to join; one they do not fit in, or that none
     * may join now (`joins` false: the edge is not accepting), is made now.
     */
    take(key: string, calls: readonly BatchedCall[], joins: boolean): OpenBatch | undefined {
      const batch = open.get(key);
      if (!batch) return undefined;
      open.delete(key);
      if (joins && fitOneWorkflow([...batch.calls, ...calls], options.maxItems)) return batch;
      options.made(batch);
      return undefined;
    },

    /**
     * Whether `batch` waits for calls to join it: a batch at most half full, none open. A lone
     * call only when calls gather behind it already (a burst), or when its caller does not wait
     * for its start (`mirrored`: a mirror's shadows come in waves, after their sync batch answers
     * them): a quiet project's call waits for nothing.
     */
    lingers: (key: string, batch: OpenBatch, behind: Behind<BatchedCall>) =>
      options.lingerMs > 0 &&
      (batch.calls.length > 1 || behind.items().length > 0 || batch.calls[0]?.mirrored) &&
      sumOf(batch.calls, deliveriesOf) * 2 <= options.maxItems &&
      !open.has(key),

    /**
     * Leaves `batch` open for the calls gathering behind it to join (when it `lingers`): it
     * waits up to `lingerMs` for as many calls as its group had (`answered`: their callers may
     * send their next ones), and is left open when those gathered fit in it. They run next, at
     * once; should they not come for it, it is made. A lone mirrored call with none gathering is
     * left open to the next group of its key, `lingerMs` at most.
     */
    async leftOpen(
      key: string,
      batch: OpenBatch,
      answered: number,
      behind: Behind<BatchedCall>,
    ): Promise<boolean> {
      const [lone, ...others] = batch.calls;
      const waitsForNext = others.length === 0 && !!lone?.mirrored && behind.items().length === 0;
      if (!waitsForNext) await behind.until(answered, options.lingerMs);
      const gathering = behind.items();
      const fits = fitOneWorkflow([...batch.calls, ...gathering], options.maxItems);
      if ((gathering.length === 0 && !waitsForNext) || open.has(key) || !fits) return false;
      open.set(key, batch);
      setTimeout(
        () => {
          if (open.get(key) !== batch) return;
          open.delete(key);
          options.made(batch);
        },
        waitsForNext ? options.lingerMs : 0,
      );
      return true;
    },
  };
}
