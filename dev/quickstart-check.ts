/**
 * Runs the quick start's examples (docs/quickstart.md, files under examples/) against a real
 * stack: for Node, Python and Go, the example caller calls the edge and the example receiver
 * verifies what Relay delivers. Also checks that the doc shows each example file as it is.
 * `npm run check:quickstart` (`-- --verbose` prints every example's output); not part of npm test
 * (it installs Python and Go packages), but .ci/run runs it.
 *
 * A language whose toolchain is missing (python3 with venv, go) is skipped, and said so. The exit
 * code is 0 only when the doc matches and every language that ran passed. Everything it starts
 * (the stack, the receivers) is stopped, and its temporary folder removed, however it ends.
 * Each language's setup is in dev/quickstart-languages.ts, its round in dev/quickstart-round.ts.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts } from "./ports.ts";
import { DOC, docProblems } from "./quickstart-doc.ts";
import { type Language, languages } from "./quickstart-languages.ts";
import { exercise, PROJECT } from "./quickstart-round.ts";
import { couldNotRun, freeStackPorts, postToControl, type Stack, startStack } from "./stack.ts";

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

  const { ownerToken = "" } = await postToControl(stack, stack.secrets.adminToken, "/projects", {
    slug: PROJECT,
    name: "Quick start",
    plan: "paid",
  });
  const base = `/projects/${PROJECT}`;
  await postToControl(stack, ownerToken, `${base}/lines`, { key: "v1" });
  const { plaintext: apiKey = "" } = await postToControl(stack, ownerToken, `${base}/keys`, {
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
    const { signingSecret: secret = "" } = await postToControl(
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
  await couldNotRun(error, join(dir, "stack.log"));
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
