/**
 * The Python tools the API's checks use (dev/python-tools.txt: openapi-python-client for the
 * generated-client test, Schemathesis for `npm run check:api`), pinned and installed like any dev
 * dependency: into a virtual environment of the project's own (.relay/python), made once and made
 * again when the pins change. Where Python or its venv module is missing, `pythonTools` says why
 * instead, so a check can skip with a clear message.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PINS = join(ROOT, "dev/python-tools.txt");
const VENV = join(ROOT, ".relay/python");
/** The pins the environment was made from; a different file makes it again. */
const STAMP = join(VENV, "relay-pins.sha256");

const run = promisify(execFile);

export type PythonTools =
  | { ready: true; bin: (tool: string) => string }
  | { ready: false; missing: string };

let making: Promise<PythonTools> | undefined;

/** The tools' environment, made on first use (pip reaches PyPI then, ~30 s). */
export function pythonTools(): Promise<PythonTools> {
  making ??= make();
  return making;
}

async function make(): Promise<PythonTools> {
  const probe = await run("python3", ["-c", "import ensurepip, venv"]).catch(
    (error: Error) => error,
  );
  if (probe instanceof Error) {
    return {
      ready: false,
      missing: /ENOENT/.test(probe.message)
        ? "python3 not found"
        : "python3 has no venv module (Debian: apt install python3-venv)",
    };
  }
  const pins = await readFile(PINS, "utf8");
  const wanted = createHash("sha256").update(pins).digest("hex");
  const made = await readFile(STAMP, "utf8").catch(() => "");
  if (made !== wanted) {
    await rm(VENV, { recursive: true, force: true });
    await run("python3", ["-m", "venv", VENV]);
    await run(
      join(VENV, "bin/pip"),
      [...["install", "--quiet", "--disable-pip-version-check", "-r", PINS]],
      { maxBuffer: 16 * 1024 * 1024 },
    );
    await writeFile(STAMP, wanted);
  }
  return { ready: true, bin: (tool) => join(VENV, "bin", tool) };
}
