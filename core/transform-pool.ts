/**
 * Transformations run on sandbox threads (./sandbox.ts), never on a process's event loop, so a
 * run that loops or allocates holds one thread for its bounded time and slows no other call. The
 * threads are shared fairly: each project waits in a line of its own, the lines take turns, and
 * no project holds every thread, so another project's run finds one free of the first's. A thread that
 * overruns (QuickJS looks at its clock between bytecodes, and a native call can outlast it) is
 * ended and replaced. The same on Node and Deno: the runtime spawns the thread.
 */
import type { SandboxRun, ThreadAnswer, ThreadJob } from "./sandbox.ts";
import {
  type RunTransform,
  type SandboxCall,
  TRANSFORM_LIMITS,
  transformOutcome,
} from "./transform.ts";

/** A sandbox thread as the pool drives it: the runtime's worker thread or Web Worker. */
export interface SandboxThread {
  post(job: ThreadJob): void;
  /** `answer` for each job; `failed` once, when the thread died. */
  listen(answer: (answer: ThreadAnswer) => void, failed: (error: unknown) => void): void;
  terminate(): void;
}

/** How long past its own bound a run may hold its thread before the thread is ended. */
const OVERRUN_GRACE_MS = 200;

interface Job extends ThreadJob {
  settle: (run: SandboxRun) => void;
}

interface Slot {
  thread: SandboxThread;
  /** It loaded its sandbox: a run's time counts from its start, not the thread's. */
  ready: boolean;
  /** Whose run it made last: its sandbox holds that project's memory, and no other's. */
  lastProject?: string;
  job: Job | null;
  timer: ReturnType<typeof setTimeout> | null;
}

/**
 * Threads per process: half the machine's cores, so a busy project's runs leave the event loop a
 * core; two at least, so a run that overran holds back no other project's while its thread is
 * replaced.
 */
export function sandboxThreads(cores: number): number {
  return Math.max(2, Math.floor(cores / 2));
}

export class TransformPool {
  private readonly slots: Slot[] = [];
  /** Waiting runs by project, and the projects in turn order. */
  private readonly lines = new Map<string, Job[]>();
  private nextId = 1;

  constructor(
    private readonly spawn: () => SandboxThread,
    private readonly size: number,
  ) {}

  /** Runs a target's transformation on `call` for `project`: the call to send, or why not. */
  readonly run: RunTransform = async (project, source, call) => {
    const run = await this.enqueue(project, "run", source, call);
    return "error" in run ? run : transformOutcome(run.output, run.bodyText);
  };

  /** Why `source` is not a transformation (a syntax error, not a function); null when it is. */
  async check(project: string, source: string): Promise<string | null> {
    const run = await this.enqueue(project, "check", source);
    return "error" in run ? run.error : null;
  }

  close(): void {
    for (const slot of this.slots) slot.thread.terminate();
    this.slots.length = 0;
  }

  private enqueue(project: string, kind: Job["kind"], source: string, call?: SandboxCall) {
    return new Promise<SandboxRun>((settle) => {
      const job: Job = { id: this.nextId++, project, kind, source, ...(call && { call }), settle };
      const line = this.lines.get(project);
      if (line) line.push(job);
      else this.lines.set(project, [job]);
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (;;) {
      // Idle ready threads, or a new one (its runs wait until it says it is ready).
      const idle = this.idleSlots();
      const job = idle.length > 0 ? this.nextJob() : undefined;
      if (!job) return;
      // The thread that ran this project last, if idle: it need not start a fresh sandbox.
      const slot = idle.find((s) => s.lastProject === job.project) ?? (idle[0] as Slot);
      slot.job = job;
      slot.lastProject = job.project;
      slot.timer = setTimeout(() => this.overran(slot), TRANSFORM_LIMITS.wallMs + OVERRUN_GRACE_MS);
      const { settle: _, ...message } = job;
      slot.thread.post(message);
    }
  }

  /**
   * The next project's first run; that project goes to the back of the turn order. A project
   * with its share of the threads running waits its turn without losing its place.
   */
  private nextJob(): Job | undefined {
    for (const [project, line] of this.lines) {
      if (this.running(project) >= this.share) continue;
      this.lines.delete(project);
      const job = line.shift();
      if (line.length > 0) this.lines.set(project, line);
      if (job) return job;
    }
    return undefined;
  }

  /** Threads a project may hold at once: all but one, so another project always finds one. */
  private get share(): number {
    return Math.max(1, this.size - 1);
  }

  private running(project: string): number {
    return this.slots.filter((slot) => slot.job?.project === project).length;
  }

  private idleSlots(): Slot[] {
    const idle = this.slots.filter((slot) => slot.ready && slot.job === null);
    if (idle.length > 0 || this.slots.length >= this.size || this.lines.size === 0) return idle;
    const slot: Slot = { thread: this.spawn(), ready: false, job: null, timer: null };
    slot.thread.listen(
      (answer) => {
        if ("ready" in answer) {
          slot.ready = true;
          this.dispatch();
        } else if (slot.job?.id === answer.id) this.finish(slot, answer.run);
      },
      (error) => this.replace(slot, { error: `the sandbox failed: ${String(error)}` }),
    );
    this.slots.push(slot);
    return [];
  }

  private finish(slot: Slot, run: SandboxRun): void {
    if (slot.timer) clearTimeout(slot.timer);
    const job = slot.job;
    slot.job = null;
    slot.timer = null;
    job?.settle(run);
    this.dispatch();
  }

  private overran(slot: Slot): void {
    this.replace(slot, { error: `it ran past ${TRANSFORM_LIMITS.runMs} ms` });
  }

  /** Ends a thread that overran or died, answering its run with `run`; a new one takes its place. */
  private replace(slot: Slot, run: SandboxRun): void {
    const at = this.slots.indexOf(slot);
    if (at < 0) return;
    this.slots.splice(at, 1);
    slot.thread.terminate();
    this.finish(slot, run);
  }
}
