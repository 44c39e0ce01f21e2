/**
 * Admission for the edge's workflow starts: at most `slots` in flight, and a call finding them
 * all taken waits at most `maxWaitMs` for one before it is refused (the caller gets 503 with
 * Retry-After). Without it a burst beyond what Temporal takes queues in the connection pool and
 * every answer waits longer than the last, until callers time out.
 *
 * Fair between projects: waiting calls queue per project, and a freed slot goes to the projects
 * in turn (round robin), so one tenant's burst cannot keep another waiting behind all of it;
 * while nobody waits, any project may use every slot.
 */
export type Release = () => void;

interface Waiter {
  admit(release: Release): void;
}

export class StartAdmission {
  private inFlight = 0;
  /** Waiting calls per project, first come first; a project's turn moves it to the back. */
  private readonly waiting = new Map<string, Waiter[]>();

  constructor(
    private readonly slots: number,
    private readonly maxWaitMs: number,
  ) {}

  /** A slot, released by the call once its start is answered; null when none came in time. */
  acquire(project: string): Promise<Release | null> {
    if (this.inFlight < this.slots && this.waiting.size === 0) {
      this.inFlight++;
      return Promise.resolve(this.releaser());
    }
    if (this.maxWaitMs === 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const queue = this.waiting.get(project) ?? [];
      if (queue.length === 0) this.waiting.set(project, queue);
      const waiter: Waiter = {
        admit: (release) => {
          clearTimeout(timer);
          resolve(release);
        },
      };
      queue.push(waiter);
      const timer = setTimeout(() => {
        queue.splice(queue.indexOf(waiter), 1);
        if (queue.length === 0) this.waiting.delete(project);
        resolve(null);
      }, this.maxWaitMs);
    });
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.handOn();
    };
  }

  /** A freed slot goes straight to the next project's first waiter, or back to the pool. */
  private handOn(): void {
    const next = this.waiting.entries().next();
    if (next.done) {
      this.inFlight--;
      return;
    }
    const [project, queue] = next.value;
    const waiter = queue.shift() as Waiter;
    this.waiting.delete(project);
    if (queue.length > 0) this.waiting.set(project, queue);
    waiter.admit(this.releaser());
  }
}
