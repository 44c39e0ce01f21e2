/**
 * The stack's processes (Postgres, the Temporal dev server, control plane, worker, edge, demo
 * receiver) as managed children, and their supervision: a child that exits on its own is
 * restarted, with backoff.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { runsFromBuild } from "../platform/modules.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** A failure to start that the user can fix; printed as its message alone, no stack trace. */
export class StartError extends Error {
  override readonly name = "StartError";
}

/** Every child still running; killed when this process exits, however it exits. */
const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

export function adopt(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

export type ProcessSpec = {
  name: string;
  env: Record<string, string>;
} & (
  | {
      /** Entry file, relative to the repository root. */
      entry: string;
      /** What runs the entry; Node with tsx unless given (the Deno edge). */
      command?: string[];
    }
  /** A program of its own (the Temporal CLI), with its arguments. */
  | { entry?: undefined; command: string[] }
) &
  (
    | {
        /** A line the process prints once it serves. */
        readyLine: string;
      }
    /** Asked until it answers true: the process serves (for one that prints no such line). */
    | { readyLine?: undefined; serves: () => Promise<boolean> }
  );

/**
 * How a supervised process is restarted: after `firstDelayMs`, doubling with each crash still
 * within `windowMs` up to `maxDelayMs`; the `maxCrashes`th crash within the window gives up.
 */
export interface RestartPolicy {
  firstDelayMs: number;
  maxDelayMs: number;
  maxCrashes: number;
  windowMs: number;
}

export const defaultRestartPolicy: RestartPolicy = {
  firstDelayMs: 1000,
  maxDelayMs: 30_000,
  maxCrashes: 5,
  windowMs: 60_000,
};

export interface Supervision extends RestartPolicy {
  /** Told, with a sentence saying why, when the process crashed too often to restart again. */
  onGiveUp(reason: string): void;
}

export class ManagedProcess {
  child: ChildProcess | null = null;
  private supervision: Supervision | null = null;
  /** When each crash within the policy's window happened. */
  private crashes: number[] = [];
  /** Stopped or killed on purpose: its exit is no crash. */
  private stopping = false;
  private servedOnce = false;

  constructor(
    readonly spec: ProcessSpec,
    private readonly output: WriteStream | "inherit",
  ) {}

  /**
   * From now on, an exit nobody asked for (a crash, `kill -9`) restarts the process; null ends
   * that (a stack that stops: its children may exit on their own first, Ctrl-C reaches them all).
   */
  supervise(supervision: Supervision | null): void {
    this.supervision = supervision;
  }

  /** Starts the process and resolves once it printed its ready line. */
  async start(timeoutMs = 60_000): Promise<void> {
    this.stopping = false;
    const child = adopt(
      spawn(...commandLine(this.spec), {
        cwd: ROOT,
        env: { ...process.env, ...this.spec.env },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    this.child = child;
    const prefix = `[${this.spec.name}] `;
    const write = (chunk: Buffer) => {
      const text = chunk
        .toString()
        .split("\n")
        .filter(Boolean)
        .map((line) => `${prefix}${line}\n`)
        .join("");
      this.print(text);
    };
    child.stdout?.on("data", write);
    child.stderr?.on("data", write);
    child.once("exit", (code, signal) => this.exited(child, code, signal));
    await new Promise<void>((resolve, reject) => {
      let seen = "";
      let waiting = true;
      const timer = setTimeout(() => {
        waiting = false;
        reject(new Error(`${this.spec.name} not ready after ${timeoutMs} ms`));
      }, timeoutMs);
      const ready = () => {
        waiting = false;
        clearTimeout(timer);
        resolve();
      };
      const { readyLine } = this.spec;
      if (readyLine !== undefined) {
        const onData = (chunk: Buffer) => {
          seen = (seen + chunk.toString()).slice(-2000);
          if (seen.includes(readyLine)) {
            child.stdout?.off("data", onData);
            ready();
          }
        };
        child.stdout?.on("data", onData);
      } else {
        const { serves } = this.spec;
        void (async () => {
          while (waiting && !(await serves().catch(() => false))) await sleep(200);
          if (waiting) ready();
        })();
      }
      child.once("exit", (code) => {
        waiting = false;
        clearTimeout(timer);
        reject(new Error(`${this.spec.name} exited with ${code} before it was ready`));
      });
    });
    this.servedOnce = true;
  }

  /** SIGKILL: the process gets no chance to finish what it was doing. Not restarted. */
  kill(): void {
    this.stopping = true;
    this.child?.kill("SIGKILL");
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.child) await stopChild(this.child);
  }

  private print(text: string): void {
    if (this.output === "inherit") process.stdout.write(text);
    else this.output.write(text);
  }

  private say(line: string): void {
    this.print(`[supervisor] ${line}\n`);
  }

  /**
   * A supervised process that exited on its own after it had served: restart it after the
   * backoff, or give up when it crashed too often. A first start that fails is its starter's
   * to report, and a child already replaced (killed, then started again) is no concern.
   */
  private exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    const supervision = this.supervision;
    if (!supervision || this.stopping || !this.servedOnce || child !== this.child) return;
    const now = Date.now();
    this.crashes = [...this.crashes.filter((at) => now - at < supervision.windowMs), now];
    const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
    const count = this.crashes.length;
    const window = `${supervision.windowMs / 1000} s`;
    if (count >= supervision.maxCrashes) {
      const reason = `${this.spec.name} ${how}: ${count} crashes within ${window}, giving up`;
      this.say(reason);
      supervision.onGiveUp(reason);
      return;
    }
    const delay = Math.min(supervision.firstDelayMs * 2 ** (count - 1), supervision.maxDelayMs);
    this.say(
      `${this.spec.name} (pid ${child.pid}) ${how}; restarting in ${delay} ms (crash ${count} of ${supervision.maxCrashes} allowed within ${window})`,
    );
    void this.restartAfter(delay, child);
  }

  private async restartAfter(delayMs: number, crashed: ChildProcess): Promise<void> {
    await sleep(delayMs);
    // Stopped, or started again by someone else, in the meantime.
    if (this.stopping || this.child !== crashed) return;
    try {
      await this.start();
      this.say(`${this.spec.name} restarted (pid ${this.child?.pid})`);
    } catch (error) {
      if (this.stopping) return;
      // An exit before the ready line already counted as the next crash; a start that hangs
      // is made one.
      this.say(`${this.spec.name} did not restart: ${(error as Error).message}`);
      this.child?.kill("SIGKILL");
    }
  }
}

/** From the build (dist/, `relay start`), a child runs the build's JavaScript on Node alone. */
const FROM_BUILD = runsFromBuild(import.meta.url);

function commandLine(spec: ProcessSpec): [string, string[]] {
  if (FROM_BUILD && spec.command === undefined && spec.entry !== undefined) {
    return [process.execPath, [spec.entry.replace(/\.ts$/, ".js")]];
  }
  const [command = process.execPath, ...args] = spec.command ?? [
    process.execPath,
    "--import",
    "tsx",
  ];
  return [command, spec.entry === undefined ? args : [...args, spec.entry]];
}

export function logFile(path: string): WriteStream {
  return createWriteStream(path, { flags: "a" });
}

export async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not ready after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** SIGTERM, then SIGKILL if the process has not exited in time. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
