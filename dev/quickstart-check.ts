/**
 * Runs the quick start's examples (docs/quickstart.md, files under examples/) against a real
 * stack: for Node, Python and Go, the example caller calls the edge and the example receiver
 * verifies what Relay delivers. Also checks that the doc shows each example file as it is.
 * `npm run check:quickstart` (`-- --verbose` prints every example's output); not part of npm test
 * (it installs Python and Go packages).
 *
 * A language whose toolchain is missing (python3 with venv, go) is skipped, and said so. The exit
 * code is 0 only when the doc matches and every language that ran passed. Everything it starts
 * (the stack, the receivers) is stopped, and its temporary folder removed, however it ends.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { freePorts } from "./ports.ts";
import { adopt, stopChild } from "./processes.ts";
import { DOC, docProblems } from "./quickstart-doc.ts";
import { freeStackPorts, type Stack, startStack } from "./stack.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/**
 * The callers reach the edge at `http://localhost:{port}`. The edge takes the project from the
 * Host's first label, and `{project}.localhost` names do not resolve for Node, Python or Go on
 * every machine (glibc without systemd-resolved), so the project is named `localhost`.
 */
const PROJECT = "localhost";
/** `--verbose`: every caller's and receiver's output, passed or not. */
const VERBOSE = process.argv.includes("--verbose");

type Name = "node" | "python" | "go";

/** What runs one language's receiver and caller, once its packages are installed. */
interface Commands {
  receiver: string[];
  caller: string[];
  env?: Record<string, string>;
}

interface Language {
  name: Name;
  /** Why it cannot run on this machine, or null when it can. */
  missing(): Promise<string | null>;
  /** Installs what the examples need under `dir`. */
  prepare(dir: string): Promise<Commands>;
}

const languages: Language[] = [
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

interface Ran {
  code: number | null;
  output: string;
}

/** Runs `command` to its end (at most `timeoutMs`), with its stdout and stderr together. */
function run(
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

async function succeed(what: string, command: string[], options: { cwd?: string } = {}) {
  const ran = await run(command, options);
  if (ran.code !== 0) throw new Error(`${what} failed (exit ${ran.code}):\n${ran.output}`);
}

/** A receiver running in the background: its lines, and a way to wait for one. */
class Background {
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

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Signs `body` as Relay signs a delivery, with `secret`, and posts it to the receiver. */
async function postSigned(port: number, secret: string, id: string, body: string) {
  const now = new Date();
  const response = await fetch(`http://127.0.0.1:${port}/hook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-relay-delivery-id": id,
      "x-relay-request-id": id.split(".")[0] ?? id,
      "x-relay-attempt": "2",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(secret).sign(id, now, body),
    },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

function outputs(language: Name, caller: Ran | undefined, receiver: Background): string {
  return [
    `--- ${language} caller output ---\n${caller?.output.trimEnd() ?? "(not run)"}`,
    `--- ${language} receiver output ---\n${receiver.output.trimEnd()}`,
  ].join("\n");
}

/**
 * One language's round: its receiver behind an endpoint of its own, its caller against the edge;
 * resolves with what was checked, or throws with the outputs.
 */
async function exercise(
  language: Name,
  commands: Commands,
  relay: { edgePort: number; apiKey: string; endpoint: string; secret: string; port: number },
): Promise<string> {
  const { port, secret } = relay;
  const receiver = new Background(commands.receiver, {
    ...commands.env,
    PORT: String(port),
    RELAY_SIGNING_SECRET: secret,
  });
  let caller: Ran | undefined;
  try {
    await receiver.waitFor(/receiver listening/, 30_000);
    caller = await run(commands.caller, {
      env: {
        ...commands.env,
        RELAY_URL: `http://${PROJECT}:${relay.edgePort}/v1/${relay.endpoint}`,
        RELAY_API_KEY: relay.apiKey,
      },
      timeoutMs: 60_000,
    });
    if (caller.code !== 0) throw new Error(`the caller exited with ${caller.code}`);
    const line = (pattern: RegExp) => {
      const match = caller?.output.match(pattern);
      if (!match) throw new Error(`the caller printed no ${pattern}`);
      return match;
    };
    const [, queued = ""] = line(/^async call: queued (req_\S+)$/m);
    const [, first = "", repeat] = line(/^idempotent call: (req_\S+), repeated: (req_\S+)$/m);
    if (first !== repeat)
      throw new Error("the repeat with the same Idempotency-Key got another id");
    const [, scheduled = ""] = line(/^delayed call: scheduled (req_\S+)$/m);
    line(/^refused: 400 bad_request: \S/m);

    // Each request delivered once and verified; the delayed one about 10 s later.
    const deliveries: string[] = [];
    for (const requestId of [queued, first, scheduled]) {
      const id = literal(requestId);
      const [, deliveryId = ""] = await receiver.waitFor(
        new RegExp(`verified delivery (${id}\\.\\S+) of ${id}:`),
        60_000,
      );
      deliveries.push(deliveryId);
    }
    const verified = /verified delivery /;
    if (receiver.count(verified) !== 3) throw new Error("the receiver verified more than 3");

    // A retry of a delivery Relay made (same id, new timestamp and signature) is dropped...
    const [again = ""] = deliveries;
    const retried = await postSigned(port, secret, again, '{"order":1001,"total":25}');
    if (retried < 200 || retried > 299) throw new Error(`a redelivery was answered ${retried}`);
    await receiver.waitFor(new RegExp(`duplicate delivery ${literal(again)}, dropped`), 10_000);
    // ...and one signed with another secret is refused.
    const otherSecret = `whsec_${randomBytes(32).toString("base64")}`;
    const forged = await postSigned(port, otherSecret, `${queued}.forged`, '{"order":666}');
    if (forged !== 400) throw new Error(`a forged delivery was answered ${forged}, not 400`);
    await receiver.waitFor(/refused: /, 10_000);
    if (receiver.count(verified) !== 3) throw new Error("the receiver took a forgery");
    if (VERBOSE) console.log(outputs(language, caller, receiver));
    return [
      "3 deliveries verified (one delayed 10 s)",
      "the repeat with an Idempotency-Key queued nothing",
      "a redelivery dropped, a forgery refused (400)",
    ].join(", ");
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${outputs(language, caller, receiver)}`);
  } finally {
    await receiver.stop();
  }
}

async function api<T = Record<string, string>>(
  stack: Stack,
  token: string,
  path: string,
  body: unknown,
): Promise<T> {
  const response = await fetch(`${stack.controlUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

const results: { name: string; outcome: "passed" | "skipped" | "FAILED"; detail: string }[] = [];
const dir = await mkdtemp(join(tmpdir(), "relay-quickstart-"));
let stack: Stack | undefined;
let cleaning: Promise<void> | undefined;
const cleanUp = () => {
  cleaning ??= (async () => {
    await stack?.stop();
    await rm(dir, { recursive: true, force: true });
  })();
  return cleaning;
};
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
}

const problems = await docProblems();
console.log(
  problems.length === 0
    ? `${DOC} shows every example file as it is`
    : `${DOC} is out of step with examples/:\n  ${problems.join("\n  ")}`,
);
let failed = problems.length > 0;
try {
  const runnable: Language[] = [];
  for (const language of languages) {
    const missing = await language.missing();
    if (missing) {
      console.log(`${language.name}: skipped, ${missing}`);
      results.push({ name: language.name, outcome: "skipped", detail: missing });
    } else {
      runnable.push(language);
    }
  }

  console.log(`starting the stack and installing the examples' packages (${dir})`);
  const ports = await freeStackPorts();
  const preparing = Promise.allSettled(
    runnable.map(async (language) => {
      const where = join(dir, language.name);
      await mkdir(where, { recursive: true });
      return language.prepare(where);
    }),
  );
  try {
    // The temporary folder itself, as bench/soak.ts has it: embedded Postgres opens it (0755)
    // to the user it runs as, which a folder below it would not reach.
    stack = await startStack({ dir, ports, output: join(dir, "stack.log") });
  } finally {
    await preparing; // nothing of it still running, however the start went
  }
  const prepared = await preparing;

  const { ownerToken = "" } = await api(stack, stack.secrets.adminToken, "/projects", {
    slug: PROJECT,
    name: "Quick start",
    plan: "paid",
  });
  const base = `/projects/${PROJECT}`;
  await api(stack, ownerToken, `${base}/lines`, { key: "v1" });
  const { plaintext: apiKey = "" } = await api(stack, ownerToken, `${base}/keys`, {
    name: "quickstart",
    mode: "live",
  });

  for (const [index, language] of runnable.entries()) {
    const ready = prepared[index];
    const { name } = language;
    if (ready?.status !== "fulfilled") {
      const reason = (ready?.reason as Error | undefined)?.message ?? "not prepared";
      results.push({ name, outcome: "FAILED", detail: reason });
      console.log(`${name}: FAILED\n${reason}`);
      continue;
    }
    const [port = 0] = await freePorts(1);
    const endpoint = `quickstart-${name}`;
    const { signingSecret: secret = "" } = await api(
      stack,
      ownerToken,
      `${base}/lines/v1/endpoints`,
      {
        path: endpoint,
        targets: [{ name: "receiver", targetUrl: `http://127.0.0.1:${port}/hook` }],
      },
    );
    try {
      const detail = await exercise(name, ready.value, {
        edgePort: ports.edge,
        apiKey,
        endpoint,
        secret,
        port,
      });
      results.push({ name, outcome: "passed", detail });
      console.log(`${name}: passed`);
    } catch (error) {
      results.push({ name, outcome: "FAILED", detail: (error as Error).message });
      console.log(`${name}: FAILED\n${(error as Error).message}`);
    }
  }
} catch (error) {
  failed = true;
  console.error(`the check could not run: ${(error as Error).message}`);
  const log = await readFile(join(dir, "stack.log"), "utf8").catch(() => "");
  if (log)
    console.error(`--- the stack's last lines ---\n${log.split("\n").slice(-40).join("\n")}`);
} finally {
  await cleanUp();
}

console.log("\nQuick start check:");
console.log(
  problems.length === 0
    ? `  doc     matches: ${DOC} shows the example files as they are`
    : "  doc     FAILED: see above",
);
const order = (name: string) => languages.findIndex((language) => language.name === name);
for (const { name, outcome, detail } of results.sort((a, b) => order(a.name) - order(b.name))) {
  console.log(`  ${name.padEnd(7)} ${outcome}: ${outcome === "FAILED" ? "see above" : detail}`);
}
if (failed || results.some((r) => r.outcome === "FAILED")) process.exitCode = 1;
