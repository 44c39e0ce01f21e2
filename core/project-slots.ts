/**
 * A worker's capacity, shared between projects: each pool (async attempts, sync calls,
 * notifications) lets one project have at most its share of calls in flight on this worker
 * while the pool is contended (half its slots in use or more), so one project's hanging targets
 * can take no more than half the pool, and no more than its share once others need the rest. A
 * pool less than half in use lets a project past its share, so a lone busy project is not held
 * back by a bound that protects no one. A call turned away is not made and does not wait in a
 * slot: the caller is told how long to wait durably (a workflow timer) before it tries again, or
 * is refused (a sync call).
 */

/** Gives the slot back; a second call does nothing. */
export type Release = () => void;

/** Told of each project's count as it changes, and of each call turned away (the metrics). */
export interface SlotObserver {
  inFlight?(project: string, count: number): void;
  turnedAway?(project: string): void;
}

/** What the wait of a turned-away call is judged from: one project's recent load here. */
export interface ProjectLoad {
  /** Calls turned away lately: about how many wait for a slot. */
  waiting: number;
  /** Calls finished per second lately: how fast slots free up. */
  finishedPerSecond: number;
  perProject: number;
  /** How long this worker has watched the project's calls (since it restarted, say). */
  watchedMs: number;
}

/** The shortest and longest wait of a turned-away call. */
export const BUSY_WAIT_MS = { min: 1000, max: 120_000 } as const;
/** The longest a target may take to answer (timeoutSeconds' bound): the slowest slots free. */
const SLOWEST_CALL_SECONDS = 90;

/**
 * How long a call its project's share turned away waits before it tries again: about as long as
 * the project's slots take to serve the calls waiting before it (waiting / finished per second),
 * from half to one and a half times that at random (`random` in [0, 1)), within 1 s and 2 min.
 * So a project's waiting calls come back about as fast as its slots free, not all at once: the
 * cost of waiting follows the project's own throughput, not the number of its calls that wait.
 * A worker judges only from what it has seen, so a wait is at most twice as long as it has
 * watched the project: a worker just restarted into a backlog, which has seen nothing finish
 * yet, looks again within seconds rather than sending the backlog to sleep for minutes.
 */
export function busyWaitMs(load: ProjectLoad, random: number): number {
  const rate = Math.max(load.finishedPerSecond, load.perProject / SLOWEST_CALL_SECONDS);
  const ms = (load.waiting / rate) * 1000 * (0.5 + random);
  const longest = Math.min(BUSY_WAIT_MS.max, Math.max(BUSY_WAIT_MS.min, 2 * load.watchedMs));
  return Math.round(Math.min(Math.max(ms, BUSY_WAIT_MS.min), longest));
}

/** Recent counts are kept in two windows of this length: the current one and the last. */
const WINDOW_MS = 15_000;

interface Counts {
  turnedAway: number;
  finished: number;
}

interface ProjectState {
  /** When this worker began to watch the project's calls. */
  since: number;
  inFlight: number;
  windowStart: number;
  current: Counts;
  last: Counts;
}

/** A caller waiting for a slot (`takeWithin`). */
interface Waiter {
  give(release: Release): void;
}

/** A pool's slots and one project's share of them. */
export interface PoolSize {
  slots: number;
  perProject: number;
}

export class ProjectSlots {
  private readonly projects = new Map<string, ProjectState>();
  private inUse = 0;
  private sweptAt: number;
  /**
   * Callers waiting for a slot (`takeWithin`), by project, each project's in the order asked; a
   * freed slot goes to one of them, not to all to race for it (thousands wait under a backlog).
   */
  private readonly waiters = new Map<string, Set<Waiter>>();
  readonly perProject: number;

  constructor(
    private readonly size: PoolSize,
    private readonly observer: SlotObserver = {},
    private readonly now: () => number = Date.now,
  ) {
    this.perProject = size.perProject;
    this.sweptAt = now();
  }

  /** A slot for `project`, or null when it has its share in flight and the pool is contended. */
  take(project: string): Release | null {
    const release = this.takeNow(project);
    if (!release) this.turnAway(project);
    return release;
  }

  /**
   * A slot for `project` now, or the first one freed that its share allows (a project's callers
   * in the order they asked, projects in turn), or null once `waitMs` passed: for a caller that
   * may wait (a batch's attempts), counted as turned away only then.
   */
  takeWithin(project: string, waitMs: number): Promise<Release | null> {
    const queue = this.waiters.get(project);
    const now = queue ? null : this.takeNow(project);
    if (now || waitMs <= 0) {
      if (!now) this.turnAway(project);
      return Promise.resolve(now);
    }
    return new Promise((resolve) => {
      const waiter: Waiter = {
        give: (release) => {
          clearTimeout(timer);
          resolve(release);
        },
      };
      const waiting = queue ?? new Set<Waiter>();
      const timer = setTimeout(() => {
        waiting.delete(waiter);
        if (waiting.size === 0 && this.waiters.get(project) === waiting) {
          this.waiters.delete(project);
        }
        this.turnAway(project);
        resolve(null);
      }, waitMs);
      waiting.add(waiter);
      this.waiters.set(project, waiting);
    });
  }

  private turnAway(project: string): void {
    this.stateOf(project).current.turnedAway++;
    this.observer.turnedAway?.(project);
  }

  private takeNow(project: string): Release | null {
    const state = this.stateOf(project);
    if (state.inFlight >= this.perProject && 2 * this.inUse >= this.size.slots) return null;
    this.move(project, state, +1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = this.stateOf(project);
      now.current.finished++;
      this.move(project, now, -1);
    };
  }

  count(project: string): number {
    return this.projects.get(project)?.inFlight ?? 0;
  }

  /** How long a call of `project` turned away now should wait (busyWaitMs). */
  waitMs(project: string, random: number): number {
    const state = this.stateOf(project);
    const watchedMs = this.now() - state.since;
    // The two windows' span, or as much of it as this worker has watched.
    const seconds = Math.max(
      1,
      Math.min(WINDOW_MS + (this.now() - state.windowStart), watchedMs) / 1000,
    );
    return busyWaitMs(
      {
        waiting: state.current.turnedAway + state.last.turnedAway,
        finishedPerSecond: (state.current.finished + state.last.finished) / seconds,
        perProject: this.perProject,
        watchedMs,
      },
      random,
    );
  }

  private stateOf(project: string): ProjectState {
    const now = this.now();
    let state = this.projects.get(project);
    if (!state) {
      state = { since: now, inFlight: 0, windowStart: now, current: empty(), last: empty() };
      this.projects.set(project, state);
    }
    const windows = Math.floor((now - state.windowStart) / WINDOW_MS);
    if (windows > 0) {
      state.last = windows === 1 ? state.current : empty();
      state.current = empty();
      state.windowStart += windows * WINDOW_MS;
    }
    return state;
  }

  private move(project: string, state: ProjectState, by: 1 | -1): void {
    state.inFlight += by;
    this.inUse += by;
    this.observer.inFlight?.(project, state.inFlight);
    if (state.inFlight === 0) this.forgetIdle();
    if (by < 0) this.handOff();
  }

  /** Freed slots to waiting callers, a project at a time, as far as each one's share allows. */
  private handOff(): void {
    for (const [project, queue] of this.waiters) {
      const [first] = queue;
      const release = first && this.takeNow(project);
      if (!release) continue;
      queue.delete(first);
      first.give(release);
      // Its turn taken: to the back of the line of projects.
      this.waiters.delete(project);
      if (queue.size > 0) this.waiters.set(project, queue);
      return;
    }
  }

  /**
   * Projects with nothing in flight and nothing lately are forgotten, looked for at most once a
   * window: the map holds only the projects busy now or within the last two windows.
   */
  private forgetIdle(): void {
    const now = this.now();
    if (now - this.sweptAt < WINDOW_MS) return;
    this.sweptAt = now;
    const stale = now - 2 * WINDOW_MS;
    for (const [project, state] of this.projects) {
      if (state.inFlight === 0 && state.windowStart < stale) this.projects.delete(project);
    }
  }
}

function empty(): Counts {
  return { turnedAway: 0, finished: 0 };
}
