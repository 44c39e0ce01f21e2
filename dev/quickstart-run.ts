/**
 * How dev/quickstart-check.ts runs the examples' commands: one to its end with its output, or a
 * receiver in the background whose lines it waits for; both from the repository's root, and
 * adopted so that they stop when the check does.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { adopt, stopChild } from "./processes.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

export interface Ran {
  code: number | null;
  output: string;
}

/** Runs `command` to its end (at most `timeoutMs`), with its stdout and stderr together. */
export function run(
  [command = "", ...args]: string[],
  options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Ran> {
  return new Promise((resolve) => {
    let output = "";
    const child = adopt(
      spawn(command, args, {
        cwd: options.cwd ?? ROOT,
        env: { ...process.env, ...options.env },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    const timer = setTimeout(() => {
      output += `\n(killed after ${options.timeoutMs} ms)`;
      child.kill("SIGKILL");
    }, options.timeoutMs ?? 300_000);
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
    };
    child.stdout?.on("data", collect);
    child.stderr?.on("data", collect);
    child.once("error", (error) => {
      clearTimeout(timer);
      resolve({ code: null, output: error.message });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

export async function succeed(what: string, command: string[], options: { cwd?: string } = {}) {
  const ran = await run(command, options);
  if (ran.code !== 0) throw new Error(`${what} failed (exit ${ran.code}):\n${ran.output}`);
}

/** A receiver running in the background: its lines, and a way to wait for one. */
export class Background {
  output = "";
  private readonly child: ChildProcess;

  constructor([command = "", ...args]: string[], env: Record<string, string>) {
    this.child = adopt(
      spawn(command, args, {
        cwd: ROOT,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    const collect = (chunk: Buffer) => {
      this.output += chunk.toString();
    };
    this.child.stdout?.on("data", collect);
    this.child.stderr?.on("data", collect);
    this.child.once("error", (error) => collect(Buffer.from(`\n${error.message}\n`)));
  }

  /** Resolves with the first match of `pattern` in the output, within `timeoutMs`. */
  async waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = this.output.match(pattern);
      if (match) return match;
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`the receiver exited before printing ${pattern}`);
      }
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  count(pattern: RegExp): number {
    return this.output.match(new RegExp(pattern, "g"))?.length ?? 0;
  }

  stop(): Promise<void> {
    return stopChild(this.child, 5000);
  }
}
