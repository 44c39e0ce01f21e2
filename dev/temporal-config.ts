/**
 * Temporal's own configuration for the dev server that `npm start`, the tests and the bench run
 * (docs/temporal.md says what to set on a real cluster instead). Every key is a server dynamic
 * config key (go.temporal.io/server common/dynamicconfig/constants.go, v1.29 in CLI v1.5.1),
 * passed as `--dynamic-config-value KEY=JSON`. The dev server accepts any key without a word, so
 * `npm run bench` (bench/temporal-ceiling.ts) checks that these take effect.
 */

export type DynamicConfig = Readonly<Record<string, number | boolean>>;

/** Temporal's defaults, as the dev server starts with no values given (the bench's baseline). */
export const temporalDefaults: DynamicConfig = {};

export const temporalDynamicConfig: DynamicConfig = {
  // The transfer queue carries every workflow and activity task from history to matching. Its
  // reader polls the store at most 20 times a second by default, so each task waited ~25 ms on
  // average (36 ms of a bare workflow's 50 ms start to result). 1000 polls/s caps that wait at
  // ~1 ms; a poll still happens only when history has written new tasks.
  "history.transferProcessorMaxPollRPS": 1000,
  // The timer queue fires retry backoffs, activity and workflow-task timeouts: same cap, same
  // reason (a retry due now should not wait up to 50 ms more to be scheduled).
  "history.timerProcessorMaxPollRPS": 1000,
  // The visibility queue writes the search attributes the panel and the Temporal UI list
  // requests by; at 20 polls/s their lists lag and the queue backs up under load.
  "history.visibilityProcessorMaxPollRPS": 1000,
  // One partition per task queue (default 4). Partitions spread a hot queue over matching hosts;
  // the dev server is one host, where a task landing on a partition no poller waits on is
  // forwarded between partitions first.
  "matching.numTaskqueueReadPartitions": 1,
  "matching.numTaskqueueWritePartitions": 1,
  // A workflow task that schedules an activity on its own task queue gets the activity back in
  // the completion's answer when the worker has a free slot: no trip through the transfer
  // queue and matching. Off by default on the server; the TypeScript SDK asks for it.
  "system.enableActivityEagerExecution": true,
  // Task queue fairness (a pre-release in v1.29, generally available from v1.31): tasks carry
  // their project as fairness key (core/temporal.ts `fairnessOf`), and matching dispatches the
  // keys in turn, so one project's backlog of thousands does not queue another's task behind it.
  // Fairness runs on the new matcher, which this version still has off by default.
  "matching.useNewMatcher": true,
  "matching.enableFairness": true,
};

/** Relay's configuration less fairness: what fairness is measured and tested against. */
export const {
  "matching.useNewMatcher": _,
  "matching.enableFairness": __,
  ...withoutFairness
} = temporalDynamicConfig;

/**
 * The dev server's SQLite store runs on one connection; WAL keeps readers off the writer, and
 * `synchronous=normal` syncs at checkpoints rather than each commit (a crash of the machine,
 * not of the process, may lose the last commits: fine for a dev store).
 */
export const sqlitePragmas: Readonly<Record<string, string>> = {
  journal_mode: "wal",
  synchronous: "normal",
};

/** The `temporal server start-dev` flags for `config` and the SQLite pragmas. */
export function devServerFlags(config: DynamicConfig): string[] {
  return [
    ...Object.entries(sqlitePragmas).flatMap(([key, value]) => [
      "--sqlite-pragma",
      `${key}=${value}`,
    ]),
    ...Object.entries(config).flatMap(([key, value]) => [
      "--dynamic-config-value",
      `${key}=${JSON.stringify(value)}`,
    ]),
  ];
}
