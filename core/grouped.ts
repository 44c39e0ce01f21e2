/**
 * Group commit, by key: what the edge does for a busy project's calls, so that many share one
 * trip (a workflow start, a credit reservation), and the worker for attempts starting and ending
 * together, so that many share one statement. A call that finds a run of its key in flight
 * waits for that run to be answered, gathering with the calls that arrive meanwhile, and they
 * run together next; a group that is full runs at once. A call that finds nothing in flight runs
 * at once, alone: at low load nothing waits, and under load a group's size follows the load.
 */
export interface Grouping<Item, Answer> {
  /**
   * Runs one group of a key; answers each item's answer, in the items' order. `answerNow`
   * answers them before the run ends (its later answers are then ignored): the group stays in
   * flight, and the next one gathering, until the run ends. `behind`: the items gathering
   * behind it, which run next.
   */
  run(
    key: string,
    items: Item[],
    answerNow: (answers: Answer[]) => void,
    behind: Behind<Item>,
  ): Promise<Answer[]>;
  /** Items one group holds at most. */
  maxItems: number;
  /** Whether `item` still fits in a group holding `gathered` (bytes, say); else that one runs. */
  fits?(gathered: readonly Item[], item: Item): boolean;
  /**
   * An item of an idle key waits one turn of the event loop for those that arrived with it, so
   * a burst (another process's group, handed on together) runs as one group, not as one alone
   * and then the rest.
   */
  firstWaitsATurn?: boolean;
}

/** The items gathering behind a run, which run next. */
export interface Behind<Item> {
  items(): readonly Item[];
  /** Resolves once `count` items gather (or the group runs, full), or after `ms`. */
  until(count: number, ms: number): Promise<void>;
}

interface Waiting<Item, Answer> {
  item: Item;
  answered: (answer: Answer) => void;
  failed: (error: unknown) => void;
}

/** A key's runs in flight, and the items gathering behind them. */
interface Lane<Item, Answer> {
  inFlight: number;
  /** Runs in flight whose items are not answered yet. */
  unanswered: number;
  /** The items of the run begun last. */
  lastSize: number;
  gathering: Waiting<Item, Answer>[];
  /** Told when an item gathers, or the gathering runs. */
  watchers: Set<() => void>;
}

/**
 * Whether an item of a busy `lane` runs at once, alone, as one of a key with nothing in flight
 * does: the lane has only a lone item's run in flight, which answered it already (`answerNow`)
 * and is finishing. A caller sending one item after another then never waits for the previous
 * one's finish; under load runs hold several items, and those arriving while one finishes
 * gather behind it.
 */
function finishingAlone<Item, Answer>(lane: Lane<Item, Answer>): boolean {
  return lane.unanswered === 0 && lane.gathering.length === 0 && lane.lastSize === 1;
}

export function grouped<Item, Answer>(
  grouping: Grouping<Item, Answer>,
): (key: string, item: Item) => Promise<Answer> {
  /** Keys with a run in flight; a lane goes once its last run is answered. */
  const lanes = new Map<string, Lane<Item, Answer>>();

  async function run(key: string, lane: Lane<Item, Answer>, group: Waiting<Item, Answer>[]) {
    lane.inFlight++;
    lane.unanswered++;
    lane.lastSize = group.length;
    let answered = false;
    try {
      // A promise settles once: answers after `answerNow`'s change nothing.
      const answer = (answers: Answer[]) => {
        for (const [i, waiting] of group.entries()) waiting.answered(answers[i] as Answer);
        if (!answered) lane.unanswered--;
        answered = true;
      };
      answer(
        await grouping.run(
          key,
          group.map((waiting) => waiting.item),
          answer,
          behind(lane),
        ),
      );
    } catch (error) {
      for (const waiting of group) waiting.failed(error);
      if (!answered) lane.unanswered--;
    } finally {
      lane.inFlight--;
      // Whoever gathered while this run was answered runs next.
      if (lane.gathering.length > 0) flush(key, lane);
      else if (lane.inFlight === 0) lanes.delete(key);
    }
  }

  function behind(lane: Lane<Item, Answer>): Behind<Item> {
    return {
      items: () => lane.gathering.map((waiting) => waiting.item),
      until: (count, ms) =>
        new Promise<void>((resolve) => {
          if (lane.gathering.length >= count) {
            resolve();
            return;
          }
          const done = () => {
            clearTimeout(timer);
            lane.watchers.delete(check);
            resolve();
          };
          const check = () => {
            if (lane.gathering.length === 0 || lane.gathering.length >= count) done();
          };
          const timer = setTimeout(done, ms);
          lane.watchers.add(check);
        }),
    };
  }

  const told = (lane: Lane<Item, Answer>) => {
    for (const watcher of lane.watchers) watcher();
  };

  function flush(key: string, lane: Lane<Item, Answer>): void {
    const group = lane.gathering;
    lane.gathering = [];
    told(lane);
    void run(key, lane, group);
  }

  return (key, item) =>
    new Promise<Answer>((answered, failed) => {
      const waiting = { item, answered, failed };
      const busy = lanes.get(key);
      if (!busy || finishingAlone(busy)) {
        const lane: Lane<Item, Answer> = busy ?? {
          inFlight: 0,
          unanswered: 0,
          lastSize: 0,
          gathering: [],
          watchers: new Set(),
        };
        lanes.set(key, lane);
        if (!grouping.firstWaitsATurn) {
          void run(key, lane, [waiting]);
          return;
        }
        lane.gathering.push(waiting);
        setTimeout(() => {
          if (lane.inFlight === 0 && lane.gathering.length > 0) flush(key, lane);
        }, 0);
        return;
      }
      const items = busy.gathering.map((w) => w.item);
      if (grouping.fits && items.length > 0 && !grouping.fits(items, item)) flush(key, busy);
      busy.gathering.push(waiting);
      if (busy.gathering.length >= grouping.maxItems) flush(key, busy);
      else told(busy);
    });
}
