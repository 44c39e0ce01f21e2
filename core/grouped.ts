/**
 * Group commit, by key: what the edge does for a busy project's calls, so that many share one
 * trip (a workflow start, a credit reservation), and the worker for attempts starting and ending
 * together, so that many share one statement. A call that finds a run of its key in flight
 * waits for that run to be answered, gathering with the calls that arrive meanwhile, and they
 * run together next; a group that is full runs at once. A call that finds nothing in flight runs
 * at once, alone: at low load nothing waits, and under load a group's size follows the load.
 */
export interface Grouping<Item, Answer> {
  /** Runs one group of a key; answers each item's answer, in the items' order. */
  run(key: string, items: Item[]): Promise<Answer[]>;
  /** Items one group holds at most. */
  maxItems: number;
  /** Whether `item` still fits in a group holding `gathered` (bytes, say); else that one runs. */
  fits?(gathered: readonly Item[], item: Item): boolean;
}

interface Waiting<Item, Answer> {
  item: Item;
  answered: (answer: Answer) => void;
  failed: (error: unknown) => void;
}

/** A key's runs in flight, and the items gathering behind them. */
interface Lane<Item, Answer> {
  inFlight: number;
  gathering: Waiting<Item, Answer>[];
}

export function grouped<Item, Answer>(
  grouping: Grouping<Item, Answer>,
): (key: string, item: Item) => Promise<Answer> {
  /** Keys with a run in flight; a lane goes once its last run is answered. */
  const lanes = new Map<string, Lane<Item, Answer>>();

  async function run(key: string, lane: Lane<Item, Answer>, group: Waiting<Item, Answer>[]) {
    lane.inFlight++;
    try {
      const answers = await grouping.run(
        key,
        group.map((waiting) => waiting.item),
      );
      for (const [i, waiting] of group.entries()) waiting.answered(answers[i] as Answer);
    } catch (error) {
      for (const waiting of group) waiting.failed(error);
    } finally {
      lane.inFlight--;
      // Whoever gathered while this run was answered runs next.
      if (lane.gathering.length > 0) flush(key, lane);
      else if (lane.inFlight === 0) lanes.delete(key);
    }
  }

  function flush(key: string, lane: Lane<Item, Answer>): void {
    const group = lane.gathering;
    lane.gathering = [];
    void run(key, lane, group);
  }

  return (key, item) =>
    new Promise<Answer>((answered, failed) => {
      const waiting = { item, answered, failed };
      const busy = lanes.get(key);
      if (!busy) {
        const lane: Lane<Item, Answer> = { inFlight: 0, gathering: [] };
        lanes.set(key, lane);
        void run(key, lane, [waiting]);
        return;
      }
      const items = busy.gathering.map((w) => w.item);
      if (grouping.fits && items.length > 0 && !grouping.fits(items, item)) flush(key, busy);
      busy.gathering.push(waiting);
      if (busy.gathering.length >= grouping.maxItems) flush(key, busy);
    });
}
