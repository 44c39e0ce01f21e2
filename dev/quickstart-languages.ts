/**
 * The quick start's languages (Node, Python, Go): what each needs on this machine, and how its
 * example receiver and caller are installed and run.
 */
import { cp } from "node:fs/promises";
import { join } from "node:path";
import { ROOT, run, succeed } from "./quickstart-run.ts";

export type Name = "node" | "python" | "go";

/** What runs one language's receiver and caller, once its packages are installed. */
export interface Commands {
  receiver: string[];
  caller: string[];
  env?: Record<string, string>;
}

export interface Language {
  name: Name;
  /** Why it cannot run on this machine, or null when it can. */
  missing(): Promise<string | null>;
  /** Installs what the examples need under `dir`. */
  prepare(dir: string): Promise<Commands>;
}

export const languages: Language[] = [
  {
    name: "node",
    missing: async () => null,
    async prepare() {
      // `standardwebhooks` is in the repository's devDependencies; the examples must typecheck.
      await succeed("tsc", [
        process.execPath,
        join(ROOT, "node_modules/typescript/bin/tsc"),
        ...["--noEmit", "--strict", "--noUncheckedIndexedAccess", "--skipLibCheck"],
        ...["--target", "es2022", "--module", "nodenext", "--types", "node"],
        "examples/node/caller.ts",
        "examples/node/receiver.ts",
      ]);
      const tsx = [process.execPath, "--import", "tsx"];
      return {
        receiver: [...tsx, "examples/node/receiver.ts"],
        caller: [...tsx, "examples/node/caller.ts"],
      };
    },
  },
  {
    name: "python",
    async missing() {
      if ((await run(["python3", "--version"])).code !== 0) return "python3 not found";
      if ((await run(["python3", "-c", "import ensurepip, venv"])).code !== 0) {
        return "python3 has no venv module (Debian: apt install python3-venv)";
      }
      return null;
    },
    async prepare(dir) {
      const venv = join(dir, "venv");
      await succeed("python3 -m venv", ["python3", "-m", "venv", venv]);
      await succeed("pip install", [
        join(venv, "bin/pip"),
        ...["install", "--quiet", "--disable-pip-version-check"],
        ...["-r", "examples/python/requirements.txt"],
      ]);
      const python = join(venv, "bin/python");
      return {
        receiver: [python, "examples/python/receiver.py"],
        caller: [python, "examples/python/caller.py"],
        // Lines reach the check as they are printed, not when a pipe's buffer fills.
        env: { PYTHONUNBUFFERED: "1" },
      };
    },
  },
  {
    name: "go",
    async missing() {
      return (await run(["go", "version"])).code === 0 ? null : "go not found";
    },
    async prepare(dir) {
      // A temporary copy of the example module; the library comes through the module proxy.
      // Built, then run, as `go run` does: stopping the receiver then stops the server itself.
      const module = join(dir, "go-module");
      const bin = join(dir, "go-bin");
      await cp(join(ROOT, "examples/go"), module, { recursive: true });
      await succeed("go build", ["go", "build", "-o", `${bin}/`, "./caller", "./receiver"], {
        cwd: module,
      });
      return { receiver: [join(bin, "receiver")], caller: [join(bin, "caller")] };
    },
  },
];
