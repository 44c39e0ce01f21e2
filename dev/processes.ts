/** Relay's own processes (control plane, worker, edge, demo receiver) as managed children. */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { fileURLToPath } from "node:url";

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

export interface ProcessSpec {
  name: string;
  /** Entry file, relative to the repository root. */
  entry: string;
  env: Record<string, string>;
  /** A line the process prints once it serves. */
  readyLine: string;
  /** What runs the entry; Node with tsx unless given (the Deno edge). */
  command?: string[];
}

export class ManagedProcess {
  child: ChildProcess | null = null;

  constructor(
    readonly spec: ProcessSpec,
    private readonly output: WriteStream | "inherit",
  ) {}

  /** Starts the process and resolves once it printed its ready line. */
  async start(timeoutMs = 60_000): Promise<void> {
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
      if (this.output === "inherit") process.stdout.write(text);
      else this.output.write(text);
    };
    child.stdout?.on("data", write);
    child.stderr?.on("data", write);
    await new Promise<void>((resolve, reject) => {
      let seen = "";
      const timer = setTimeout(
        () => reject(new Error(`${this.spec.name} not ready after ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onData = (chunk: Buffer) => {
        seen = (seen + chunk.toString()).slice(-2000);
        if (seen.includes(this.spec.readyLine)) {
          clearTimeout(timer);
          child.stdout?.off("data", onData);
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`${this.spec.name} exited with ${code} before it was ready`));
      });
    });
  }

  /** SIGKILL: the process gets no chance to finish what it was doing. */
  kill(): void {
    this.child?.kill("SIGKILL");
  }

  async stop(): Promise<void> {
    if (this.child) await stopChild(this.child);
  }
}

function commandLine(spec: ProcessSpec): [string, string[]] {
  const [command = process.execPath, ...args] = spec.command ?? [
    process.execPath,
    "--import",
    "tsx",
  ];
  return [command, [...args, spec.entry]];
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
